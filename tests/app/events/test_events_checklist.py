"""Incident checklists in the store (both backends): ticks with who and when, kept per step text,
untouched by the pipeline's upserts and deleted with their incident."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from campusguard.app.config import parse_config
from campusguard.app.events.checklist import Checklist, sop_of
from campusguard.app.events.store import UpsertingEventStore
from campusguard.app.events.types import Event

STEPS = ("Call the patrol", "Check the door", "Tell the duty officer", "Write the log")


def test_steps_are_ticked_with_who_and_when_and_deleted_with_the_incident(
    store: UpsertingEventStore, make_event: Callable[..., Event]
) -> None:
    store.record(make_event())
    store.record(make_event(event_id="e2"))
    before = datetime.now(UTC) - timedelta(seconds=1)
    mark = store.set_step("e1", STEPS[0], True, user="otto")
    store.set_step("e1", STEPS[2], True, user="ada")
    store.set_step("e1", STEPS[2], False, user="otto")  # unticked: the row remembers who and when
    store.set_step("e1", STEPS[3], True, user="otto")
    assert mark.by == "otto" and datetime.fromisoformat(mark.at) >= before
    with pytest.raises(KeyError):
        store.set_step("nope", STEPS[0], True, user="otto")

    store.record(make_event(phase="end", end_s=20.0))  # the pipeline's upsert leaves the ticks alone
    marks = store.checklists(["e1", "e2", "nope"])
    assert set(marks) == {"e1"} and marks["e1"][STEPS[2]].checked is False and marks["e1"][STEPS[2]].by == "otto"
    checklist = Checklist(STEPS, marks["e1"])
    assert (checklist.done, checklist.total, checklist.summary()) == (2, 4, "2 of 4 steps")
    assert checklist.unchecked() == [STEPS[1], STEPS[2]]
    rows = checklist.to_dict()["steps"]
    assert [r["checked"] for r in rows] == [True, False, False, True] and rows[0]["by"] == "otto"

    # a tick of a step the config dropped is shown, not counted
    assert Checklist(STEPS[1:], marks["e1"]).done == 1
    assert Checklist(STEPS[1:], marks["e1"]).to_dict()["steps"][-1] == {
        "index": None,
        "step": STEPS[0],
        "checked": True,
        "by": "otto",
        "at": mark.at,
    }

    assert store.delete_events(["e1"]) == 1
    assert store.checklists(["e1"]) == {}


def test_sop_of_finds_the_rules_steps(tmp_path) -> None:
    text = f"""
cameras:
  - id: gate
    source: {tmp_path / "x.mp4"}
    zones: [{{name: east, polygon: [[0, 0], [10, 0], [10, 10]]}}]
    rules:
      - {{kind: intrusion, zone: east, sop: {list(STEPS)!r}}}
      - {{kind: loitering, zone: east, name: hang}}
"""
    config = parse_config(text, "watch.yaml").config
    assert sop_of(config, "gate", "intrusion:east") == STEPS
    assert sop_of(config, "gate", "hang") == ()
    assert sop_of(config, "other", "intrusion:east") == ()
