"""Escalation (issue 34, target 3): an incident nobody acknowledged within ``after_s`` sends one
``escalation`` alert to the sinks the rule names; one acknowledged in time (by another connection
to the store, as the console does) sends none; the deadline survives a restart."""

from __future__ import annotations

import io
import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from campusguard.app.alerts.escalation import EscalationRule, Escalator
from campusguard.app.alerts.jsonl import JsonlSink
from campusguard.app.config import parse_config
from campusguard.app.engine.wiring import open_store_and_sinks
from campusguard.app.events.sqlite import SQLiteEventStore
from campusguard.errors import ConfigError


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _review_state(store: SQLiteEventStore):
    def state(event_id: str) -> str | None:
        record = store.get_record(event_id)
        return None if record is None else record.state

    return state


@pytest.fixture
def setup(tmp_path, make_event):
    """A store with two started incidents, a JSON-lines sink named ``duty``, and the console's own
    connection to the same store file."""
    db = tmp_path / "events.db"
    watch_store, console_store = SQLiteEventStore(db), SQLiteEventStore(db)
    now = datetime.now(UTC)
    events = [make_event(event_id=f"inc{i}", camera_id="cam1", rule_name="night", started_at=now) for i in range(2)]
    for e in events:
        watch_store.add(e)
    duty = JsonlSink(tmp_path / "duty.jsonl", phases=["end"])  # reports ends only: escalations still reach it
    yield tmp_path, watch_store, console_store, events, duty
    watch_store.close()
    console_store.close()


def test_one_escalation_unless_acknowledged_in_time(setup):
    tmp_path, watch_store, console_store, events, duty = setup
    rules = {("cam1", "night"): EscalationRule(after_s=0.6, to=("duty",))}
    escalator = Escalator(tmp_path / "esc.db", rules, {"duty": duty}, _review_state(watch_store), tick_s=0.05)
    for e in events:
        escalator.send(e)
        escalator.send(e)  # a replayed start keeps the first deadline
    console_store.review("inc1", "acknowledge", user="guard")  # the console, before the deadline
    time.sleep(1.0)
    escalator.close()
    duty.close()
    sent = _lines(tmp_path / "duty.jsonl")
    assert [(d["event_id"], d["phase"]) for d in sent] == [("inc0", "escalation")]
    assert sent[0]["rule_name"] == "night" and escalator.escalated == 1 and escalator.cancelled == 1


def test_the_deadline_survives_a_restart_and_fires_once(setup, make_event):
    tmp_path, watch_store, _, events, duty = setup
    rules = {("cam1", "night"): EscalationRule(after_s=0.8, to=("duty",))}
    first = Escalator(tmp_path / "esc.db", rules, {"duty": duty}, _review_state(watch_store), tick_s=0.05)
    first.send(events[0])
    first.close()  # the process stops before the deadline
    assert _lines(tmp_path / "duty.jsonl") == []
    second = Escalator(tmp_path / "esc.db", rules, {"duty": duty}, _review_state(watch_store), tick_s=0.05)
    time.sleep(1.1)
    second.send(events[0])  # the spool replays the start after the escalation: not again
    time.sleep(0.2)
    second.close()
    duty.close()
    assert [(d["event_id"], d["phase"]) for d in _lines(tmp_path / "duty.jsonl")] == [("inc0", "escalation")]
    third = Escalator(tmp_path / "esc.db", rules, {"duty": duty}, _review_state(watch_store), tick_s=0.05)
    assert third.check(time.time() + 3600) == 0 and third.pending() == 0
    third.close()


def _config(tmp_path: Path, escalate: str) -> str:
    return f"""\
cameras:
  - id: cam1
    source: {tmp_path / "v.mp4"}
    zones:
      - name: gate
        polygon: [[0, 0], [10, 0], [10, 10], [0, 10]]
    rules:
      - kind: intrusion
        name: night
        zone: gate
        escalate: {escalate}
alerts:
  - kind: stdout
  - kind: jsonl
    name: duty
    path: {tmp_path / "duty.jsonl"}
storage:
  sqlite: {tmp_path / "events.db"}
"""


def test_the_wiring_gives_the_escalating_rules_an_escalator_that_reads_the_store(tmp_path, make_event):
    loaded = parse_config(_config(tmp_path, "{after_s: 0.3, to: [duty]}"), "c.yaml")
    store, sinks = open_store_and_sinks(loaded, io.StringIO())
    try:
        assert isinstance(sinks[0], Escalator) and len(sinks) == 3  # first: closed before the sinks it sends to
        event = make_event(camera_id="cam1", rule_name="night", started_at=datetime.now(UTC))
        store.record(event)
        for sink in sinks:
            sink.send(event)
        time.sleep(1.0)
    finally:
        for sink in sinks:
            sink.close()
        store.close()
    phases = [d["phase"] for d in _lines(tmp_path / "duty.jsonl")]
    assert phases == ["start", "escalation"]


@pytest.mark.parametrize(
    ("escalate", "message"),
    [
        (
            "{after_s: 5, to: [pager]}",
            r"c.yaml:\d+: cameras\[0\].rules\[0\].escalate.to\[0\]: no alert sink is named 'pager'",
        ),
        ("{after_s: 0, to: [duty]}", r"escalate.after_s: Input should be greater than 0"),
        ("{after_s: 5, to: []}", r"escalate.to: List should have at least 1 item"),
    ],
)
def test_bad_escalations_are_one_line_errors(tmp_path, escalate, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(_config(tmp_path, escalate), "c.yaml")


def test_sink_names_default_to_the_kind_and_are_unique(tmp_path):
    cfg = parse_config(_config(tmp_path, "{after_s: 5, to: [stdout]}"), "c.yaml").config
    assert [s.sink_name for s in cfg.alerts] == ["stdout", "duty"]
    two = "alerts:\n  - kind: stdout\n  - {kind: jsonl, path: a.jsonl}\n  - {kind: jsonl, path: b.jsonl}\n"
    with pytest.raises(ConfigError, match=r"alerts\[2\].name: alert sink name 'jsonl' is already used by alerts\[1\]"):
        parse_config("cameras: []\n" + two, "c.yaml")
    with pytest.raises(ConfigError, match=r"alerts\[0\].name"):
        parse_config("cameras: []\nalerts:\n  - {kind: stdout, name: 'a b'}\n", "c.yaml")
