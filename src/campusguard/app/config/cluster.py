"""The cluster section: how `watch --ray` and `serve --ray` place camera groups on Ray actors."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from campusguard.app.config.base import ConfigModel

__all__ = ["ClusterConfig"]


class ClusterConfig(ConfigModel):
    """Camera groups on a Ray cluster (used only with ``--ray``; ignored otherwise)."""

    cameras_per_actor: int = Field(
        4,
        ge=1,
        le=256,
        title="Cameras per actor",
        description=(
            "Enabled cameras are cut, in config order, into groups of this many; each group runs on one "
            "Ray actor with its own detector, so cross-camera batching stays within the group."
        ),
    )
    num_cpus: float = Field(
        1.0, ge=0, le=1024, title="CPUs per actor", description="Ray CPU resource each camera-group actor asks for."
    )
    num_gpus: float = Field(
        0.0,
        ge=0,
        le=64,
        title="GPUs per actor",
        description="Ray GPU resource each actor asks for (fractions share a GPU between actors).",
    )
    resources: dict[str, float] = Field(
        default_factory=dict,
        title="Custom resources",
        description='Custom Ray resources each actor asks for, e.g. {"campus-north": 1} to pin groups to labelled nodes.',
    )
    strategy: Literal["spread", "pack"] = Field(
        "spread",
        title="Placement",
        description="Ray scheduling of the actors: spread over the nodes (SPREAD) or fill nodes first (DEFAULT).",
    )
    max_restarts: int = Field(
        3,
        ge=-1,
        le=1000,
        title="Actor restarts",
        description="How many times Ray restarts a dead camera-group actor (-1: without limit); its cameras resume.",
    )
    max_task_retries: int = Field(
        3,
        ge=-1,
        le=1000,
        title="Call retries",
        description="How many times Ray retries a call to an actor that died during it (-1: without limit).",
    )
    poll_interval_s: float = Field(
        0.2,
        gt=0,
        le=60,
        title="Poll interval",
        description="Seconds between the driver's pulls of each actor's new events and metrics.",
    )
    restart_timeout_s: float = Field(
        120.0,
        gt=0,
        le=3600,
        title="Restart timeout",
        description=(
            "An actor that stays unreachable this many seconds is given up: its open incidents are ended "
            "and the run fails."
        ),
    )
