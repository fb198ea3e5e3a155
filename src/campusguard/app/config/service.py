"""The service section: how `watch`, `serve` and `scan` stop."""

from __future__ import annotations

from pydantic import Field

from campusguard.app.config.base import ConfigModel

__all__ = ["ServiceConfig"]


class ServiceConfig(ConfigModel):
    """The process's life: how long a stop (SIGTERM, SIGINT) may take."""

    stop_timeout_s: float = Field(
        10.0,
        gt=0,
        le=600,
        title="Stop time-out",
        description=(
            "On SIGTERM or SIGINT the cameras stop, open incidents end (details.interrupted), recordings are "
            "finished and the sinks flushed; the process exits 0 once done, or 1 when that takes longer than "
            "this many seconds. A second signal exits at once. Keep systemd's TimeoutStopSec above it."
        ),
    )
