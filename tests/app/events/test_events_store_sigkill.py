"""Durability: a writer killed with SIGKILL mid-run loses no event it had reported as raised."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from campusguard.app.events import read_events

WRITER = textwrap.dedent(
    """
    import sys
    from campusguard.app.events import Event, SQLiteEventStore

    store = SQLiteEventStore(sys.argv[1])
    i = 0
    while True:
        ev = Event(event_id=f"ev-{i:06d}", phase="start", camera_id="cam0", rule_name="r",
                   rule_kind="intrusion", zone="z", start_s=float(i))
        store.record(ev)              # committed when this returns ...
        print(ev.event_id, flush=True)  # ... and only then reported as raised
        i += 1
    """
)


def test_every_reported_event_survives_sigkill(tmp_path):
    db = tmp_path / "events.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, text=True, env={**os.environ}
    )
    assert proc.stdout is not None
    reported = []
    try:
        for line in proc.stdout:
            reported.append(line.strip())
            if len(reported) >= 150:
                break
    finally:
        os.kill(proc.pid, signal.SIGKILL)  # mid-run: it is writing the next events now
        proc.wait(timeout=30)
    # lines already in the pipe were reported too
    reported += [line.strip() for line in proc.stdout.read().splitlines() if line.strip()]
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert len(reported) >= 150
    stored = {e.event_id for e in read_events(db)}
    missing = [r for r in reported if r not in stored]
    assert missing == []
