"""Two sinks sharing one dead-letter file (two webhooks with the default `<store>.dead-letter.jsonl`): one
re-drives its dead letters (`DeadLetters.take` rewrites the file) while the other keeps appending; no line of
either is lost or doubled."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from campusguard.app.alerts.sender import DeadLetters


def test_a_redrive_never_loses_another_sinks_appends(tmp_path: Path) -> None:
    path = tmp_path / "events.dead-letter.jsonl"
    a = DeadLetters(path, target="http://a.example/hook")
    b = DeadLetters(path, target="http://b.example/hook")
    n = 400
    for i in range(n):
        a.add({"n": i}, "refused")
    taken: list[dict] = []
    done = threading.Event()

    def redrive() -> None:
        while not done.is_set():
            taken.extend(a.take())
            for payload in taken[-5:]:
                a.add(payload, "refused again")  # some go back, as a failed re-drive does
            del taken[-5:]

    worker = threading.Thread(target=redrive)
    worker.start()
    try:
        for i in range(n):
            b.add({"n": i}, "timeout")
    finally:
        done.set()
        worker.join(30)
    taken += a.take()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    mine = sorted(r["event"]["n"] for r in lines if r["url"] == "http://b.example/hook")
    assert mine == list(range(n)), f"{n - len(set(mine))} of the other sink's lines lost"
    assert sorted(p["n"] for p in taken) == list(range(n))  # the re-driving sink's own, each once
    a.close()
    b.close()
