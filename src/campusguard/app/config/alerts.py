"""The alerts section: where stored events are sent (stdout, a JSON-lines file, a webhook)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from campusguard.app.config.base import ConfigModel

__all__ = ["AlertSinkConfig"]

AlertPhase = Literal["start", "update", "end"]


def _start_and_end() -> list[AlertPhase]:
    return ["start", "end"]


class AlertSinkConfig(ConfigModel):
    """Where raised events are sent, after they are stored."""

    kind: Literal["stdout", "jsonl", "webhook"] = Field(
        "stdout", title="Kind", description="`stdout`, `jsonl` (append to a file) or `webhook` (HTTP POST)."
    )
    path: str | None = Field(None, title="Path", description="jsonl: the file to append to.")
    url: str | None = Field(
        None, title="URL", description="webhook: the receiver's http(s) URL.", pattern=r"^https?://"
    )
    timeout_s: float = Field(5.0, gt=0, le=300, title="Timeout", description="webhook: seconds per request.")
    retries: int = Field(
        5,
        ge=0,
        le=100,
        title="Retries",
        description="webhook: attempts after the first before the alert goes to the dead-letter file.",
    )
    backoff_s: float = Field(
        0.5, ge=0, le=600, title="Back-off", description="webhook: first delay between retries, doubled each time."
    )
    dead_letter: str | None = Field(
        None, title="Dead-letter file", description="webhook: JSON-lines file for alerts that could not be delivered."
    )
    phases: list[AlertPhase] = Field(
        default_factory=_start_and_end,
        title="Phases",
        description="Event lifecycle phases sent to this sink.",
    )

    @model_validator(mode="after")
    def _needs(self) -> AlertSinkConfig:
        if self.kind == "jsonl" and not self.path:
            raise ValueError("a jsonl alert sink needs `path`")
        if self.kind == "webhook" and not self.url:
            raise ValueError("a webhook alert sink needs `url`")
        return self
