"""The event phases: one definition (`EVENT_PHASES`) and one filter (`PhaseFilter`) for every sink."""

from __future__ import annotations

import pytest

from campusguard.app.alerts import JsonlSink, StdoutSink
from campusguard.app.alerts.registry import SINKS
from campusguard.app.events.types import EVENT_PHASES, Event, PhaseFilter


def make_event(phase: str) -> Event:
    return Event(event_id="e1", phase=phase, camera_id="c", rule_name="r", rule_kind="intrusion", zone="z", start_s=1.0)  # type: ignore[arg-type]


def test_event_phases_are_the_lifecycle_in_order() -> None:
    assert EVENT_PHASES == ("start", "update", "end")


@pytest.mark.parametrize(
    ("phases", "accepted"),
    [
        (EVENT_PHASES, ["start", "update", "end"]),
        (("start", "end"), ["start", "end"]),
        ([], []),
        ("end", ["end"]),  # one phase as a bare string, not its letters
    ],
)
def test_the_phase_filter_accepts_the_chosen_phases(phases, accepted) -> None:
    chosen = PhaseFilter(phases)
    assert [p for p in EVENT_PHASES if chosen.accepts(make_event(p))] == accepted


def test_an_unknown_phase_fails_loudly() -> None:
    with pytest.raises(ValueError, match=r"unknown event phase\(s\) \['ended'\]"):
        PhaseFilter(["start", "ended"])


def test_the_sinks_take_their_phases_through_the_one_filter(tmp_path) -> None:
    assert StdoutSink().phases.phases == frozenset(EVENT_PHASES)
    assert JsonlSink(tmp_path / "e.jsonl", phases=["end"]).phases.phases == frozenset({"end"})


@pytest.mark.parametrize("kind", SINKS.kinds())
def test_the_alerts_config_offers_the_same_phases(kind) -> None:
    schema = SINKS.entry(kind).config.model_json_schema()
    assert tuple(schema["properties"]["phases"]["items"]["enum"]) == EVENT_PHASES
