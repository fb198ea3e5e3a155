"""Escalation reads the acknowledgement from the event store the console writes (issue 34, target 3):
the same over SQLite and the real PostgreSQL, the console being a second connection to the store."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

from campusguard.app.alerts.escalation import EscalationRule, Escalator
from campusguard.app.alerts.jsonl import JsonlSink
from campusguard.app.events import open_event_store


def test_an_acknowledge_through_another_connection_cancels_the_escalation(target, tmp_path, make_event):
    watch_store, console_store = open_event_store(target), open_event_store(target)
    duty = JsonlSink(tmp_path / "duty.jsonl")
    try:
        now = datetime.now(UTC)
        events = [make_event(event_id=f"inc{i}", camera_id="cam1", rule_name="night", started_at=now) for i in range(2)]
        for e in events:
            watch_store.record(e)

        def state(event_id: str) -> str | None:
            record = watch_store.get_record(event_id)
            return None if record is None else str(record.state)

        rules = {("cam1", "night"): EscalationRule(after_s=0.6, to=("duty",))}
        escalator = Escalator(tmp_path / "esc.db", rules, {"duty": duty}, state, tick_s=0.05)
        for e in events:
            escalator.send(e)
        console_store.review("inc1", "acknowledge", user="guard")
        time.sleep(1.0)
        escalator.close()
    finally:
        duty.close()
        watch_store.close()
        console_store.close()
    sent = [json.loads(x) for x in (tmp_path / "duty.jsonl").read_text().splitlines()]
    assert [(d["event_id"], d["phase"]) for d in sent] == [("inc0", "escalation")]
