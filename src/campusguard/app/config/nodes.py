"""The nodes section: how `serve` nodes sharing one PostgreSQL database run and take over cameras."""

from __future__ import annotations

from pydantic import Field, model_validator

from campusguard.app.config.base import ConfigModel

__all__ = ["NodesConfig"]


class NodesConfig(ConfigModel):
    """Clocks of the nodes (``serve --node`` with ``storage.postgresql``); ignored otherwise."""

    heartbeat_s: float = Field(
        1.0, gt=0, le=30, title="Heartbeat", description="How often a node says it is alive and renews its leases, seconds."
    )
    lease_s: float = Field(
        6.0,
        gt=0,
        le=300,
        title="Lease",
        description="How long a camera's lease lasts without renewal: the longest a dead node's cameras wait "
        "before another node may take them, seconds.",
    )
    fence_s: float = Field(
        4.0,
        gt=0,
        le=300,
        title="Fence",
        description="A node that could not renew its leases for this long stops its cameras (less than `lease_s`, "
        "so a camera is never run by two nodes), seconds.",
    )
    dead_s: float = Field(
        4.0, gt=0, le=300, title="Dead after", description="A node unseen for this long is left out, seconds."
    )
    settle_s: float = Field(
        3.0,
        ge=0,
        le=600,
        title="Settle",
        description="A node that starts or comes back gets cameras once seen without a gap for this long, seconds.",
    )
    hold_s: float = Field(
        10.0,
        ge=0,
        le=3600,
        title="Hold",
        description="A camera stays at least this long on the node that took it before it is handed back, seconds.",
    )

    @model_validator(mode="after")
    def _check_order(self) -> NodesConfig:
        if not self.heartbeat_s < self.fence_s < self.lease_s:
            raise ValueError("nodes: heartbeat_s < fence_s < lease_s is needed (a node stops before its lease ends)")
        return self
