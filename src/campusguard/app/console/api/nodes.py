"""Nodes (``serve --node``): every node of the site, when it was last seen, and the cameras it runs."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, HTTPException, Request, status
from pydantic import BaseModel, Field

from campusguard.app.console.identity.auth import console_state

router = APIRouter(tags=["nodes"])


class NodeOut(BaseModel):
    name: str
    url: str | None = Field(None, description="Its console's URL (live views of its cameras are proxied there).")
    host: str | None = None
    live: bool = Field(description="Seen within `nodes.dead_s` and not stopped.")
    stopped: bool = Field(description="It stopped cleanly (its cameras were handed over at once).")
    started_at: datetime
    seen_at: datetime
    seen_s_ago: float = Field(description="Seconds since its last heartbeat (PostgreSQL's clock).")
    cameras: list[str] = Field(description="The cameras it holds a valid lease for.")
    this_node: bool = Field(description="The node that answered this request.")


@router.get("/nodes", responses={404: {"description": "This console does not run as a node (no PostgreSQL store)."}})
def list_nodes(request: Request) -> list[NodeOut]:
    """Every node of the site (running, or seen before), when it was last seen, and the cameras it runs."""
    table = console_state(request).runtime.node_table()
    if table is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "this console runs on one box, not as a node (docs/cluster.md)")
    return [NodeOut(**row) for row in table]
