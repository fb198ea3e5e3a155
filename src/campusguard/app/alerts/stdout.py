"""`StdoutSink`: one line per event on standard output (`format_event`)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Collection
from typing import Literal, TextIO

from pydantic import Field

from campusguard.app.alerts.spec import SinkConfigBase, SinkContext, SinkEntry
from campusguard.app.events.types import EVENT_PHASES, Event, PhaseFilter
from campusguard.app.infra.configmodel import printable

__all__ = ["STDOUT", "StdoutSink", "StdoutSinkConfig", "format_event"]


class StdoutSinkConfig(SinkConfigBase):
    """Print one line per event."""

    kind: Literal["stdout"] = Field("stdout", title="Kind", description="`stdout`: one line per event.")


def format_event(event: Event) -> str:
    """One line: ``[phase] camera rule(kind) zone t=start..end ids=[..] classes=[..]``."""
    end = "" if event.end_s is None else f"..{event.end_s:.2f}"
    classes = ",".join(event.class_names) if event.class_names else ",".join(map(str, event.class_ids))
    extra = ""
    if event.count is not None:
        extra += f" count={event.count}"
    if event.direction is not None:
        extra += f" direction={event.direction}"
    line = (
        f"[{event.phase}] {event.camera_id} {event.rule_name}({event.rule_kind}) zone={event.zone} "
        f"t={event.start_s:.2f}{end}s ids={list(event.tracker_ids)} classes=[{classes}]{extra} id={event.event_id}"
    )
    return printable(line)  # one line whatever the names hold: no forged lines, no terminal escapes


class StdoutSink:
    """Print one line per event (`format_event`).

    Args:
        stream: text stream (default ``sys.stdout``, looked up at each send).
        phases: lifecycle phases reported.
    """

    def __init__(self, stream: TextIO | None = None, *, phases: Collection[str] = EVENT_PHASES) -> None:
        self.stream = stream
        self.phases = PhaseFilter(phases)
        self._lock = threading.Lock()

    def send(self, event: Event) -> None:
        if not self.phases.accepts(event):
            return
        stream = self.stream or sys.stdout
        with self._lock:
            print(format_event(event), file=stream, flush=True)

    def close(self, timeout_s: float = 5.0) -> None:
        return None


def _build(cfg: StdoutSinkConfig, ctx: SinkContext) -> StdoutSink:
    return StdoutSink(ctx.out, phases=cfg.phases)


STDOUT = SinkEntry(StdoutSinkConfig, _build, order=10)
