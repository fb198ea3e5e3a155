"""The words of the event filters: rule kinds with their labels, and event phases.

The console's pages build their kind filter and labels, and the zone editor its rule forms, from
this route, so a rule kind added to the registry (`campusguard.app.rules.registry.RULES`) shows up without editing a page.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from campusguard.app.console.identity.auth import console_state
from campusguard.app.console.rule_form import RuleFormOut, rule_form
from campusguard.app.events.types import EVENT_PHASES
from campusguard.app.rules import registry

__all__ = ["RuleKindOut", "RuleKindsOut", "router"]

router = APIRouter(tags=["events"])


class RuleKindOut(RuleFormOut):
    """One rule kind of the registry, with the zone editor's form of its section (`rule_form`)."""

    kind: str = Field(description="The kind as events and the config spell it (`fire_lane`).")
    label: str = Field(description="The kind for people (`Fire lane`).")
    has_end: bool = Field(
        description="Whether its incidents last (an `end` phase follows `start`); false for line crossings."
    )
    section: str | None = Field(
        None,
        description="The camera section that configures the kind instead of a `rules:` item (`health` for "
        "`camera_health`, on by default for every camera); null for the kinds added as rules. The zone editor "
        "offers only those.",
    )


class RuleKindsOut(BaseModel):
    """Every rule kind, in the registry's order, and the phases of an event's lifecycle."""

    kinds: list[RuleKindOut]
    phases: list[str] = Field(description="Event phases in lifecycle order (`start`, `update`, `end`).")


@router.get("/rule-kinds")
def rule_kinds(request: Request) -> RuleKindsOut:
    """The rule kinds (kind, label, whether an incident has an end, the camera section that configures it
    when it is not a `rules:` item, what it watches and the fields of its section, from its config model,
    with the configured alert sinks as the choices of `escalate.to`) and the event phases."""
    sinks = [a.sink_name for a in console_state(request).runtime.loaded.config.alerts]
    return RuleKindsOut(
        kinds=[
            RuleKindOut(
                kind=e.kind,
                label=e.label,
                has_end=e.has_end,
                section=e.section,
                **dict(rule_form(e.config, sinks=sinks)),
            )
            for e in registry.RULES
        ],
        phases=list(EVENT_PHASES),
    )
