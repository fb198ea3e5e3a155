"""Incident checklists: a rule's standard operating procedure (``sop: [steps]``) and who ticked what.

A rule's config lists its steps (`campusguard.app.config.rules.RuleConfigBase.sop`); the store
keeps, per incident and step text, whether it is ticked and who changed it when
(`campusguard.app.events.store.UpsertingEventStore.set_step`, table ``event_steps``). A step is
known by its text, so reordering the steps in the config keeps the ticks; a tick of a step the
config no longer has is kept (and shown) but does not count towards ``done``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Checklist", "StepMark", "sop_of"]


@dataclass(frozen=True)
class StepMark:
    """The stored state of one step of one incident: ticked or not, by whom and when (ISO 8601 UTC)."""

    step: str
    checked: bool
    by: str
    at: str


@dataclass(frozen=True)
class Checklist:
    """An incident's steps (the rule's ``sop``, in order) and their stored marks (by step text)."""

    steps: tuple[str, ...] = ()
    marks: dict[str, StepMark] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return len(self.steps)

    @property
    def done(self) -> int:
        """How many of the rule's steps are ticked."""
        return sum(1 for s in self.steps if (m := self.marks.get(s)) is not None and m.checked)

    def unchecked(self) -> list[str]:
        """The rule's steps not ticked, in order."""
        return [s for s in self.steps if not ((m := self.marks.get(s)) is not None and m.checked)]

    def summary(self) -> str:
        """``"2 of 4 steps"`` (the timeline's line); empty without steps."""
        return f"{self.done} of {self.total} steps" if self.total else ""

    def to_dict(self) -> dict[str, Any]:
        """``{"done", "total", "steps": [{"index", "step", "checked", "by", "at"}]}``: the rule's steps,
        then ticks of steps the config no longer has (``index`` null)."""
        rows: list[dict[str, Any]] = []
        for i, step in enumerate(self.steps):
            mark = self.marks.get(step)
            rows.append(
                {
                    "index": i,
                    "step": step,
                    "checked": bool(mark and mark.checked),
                    "by": mark.by if mark else None,
                    "at": mark.at if mark else None,
                }
            )
        for step, mark in sorted(self.marks.items()):
            if step not in self.steps:
                rows.append({"index": None, "step": step, "checked": mark.checked, "by": mark.by, "at": mark.at})
        return {"done": self.done, "total": self.total, "steps": rows}


class _Rule(Protocol):
    sop: list[str]

    def display_name(self) -> str: ...


class _Camera(Protocol):
    id: str

    def incident_rules(self) -> Sequence[_Rule]: ...


class _Config(Protocol):
    @property
    def cameras(self) -> Sequence[_Camera]: ...


def sop_of(config: _Config, camera_id: str, rule_name: str) -> tuple[str, ...]:
    """The checklist steps of the rule named ``rule_name`` (its display name) on ``camera_id`` of a
    `campusguard.app.config.WatchConfig` (typed structurally: the event store does not import the config); ``()``
    when the camera or rule is gone from the config or the rule has none."""
    for cam in config.cameras:
        if cam.id != camera_id:
            continue
        for rule in cam.incident_rules():
            if rule.display_name() == rule_name:
                return tuple(rule.sop)
    return ()
