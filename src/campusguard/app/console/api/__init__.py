"""The `/api/v1` routers of the console: thin handlers that parse, call the runtime or a store, serialise.

`public_router` holds the only API route open without credentials (login); `router` holds every other
one and is mounted by `campusguard.app.console.server` under the `current_user` dependency.
"""

from fastapi import APIRouter

from campusguard.app.console.api import audit, cameras, events, health, kinds, nodes, session, storage, users

public_router = APIRouter()
public_router.include_router(session.public_router)

router = APIRouter()
for _module in (session, cameras, events, kinds, storage, users, audit, health, nodes):
    router.include_router(_module.router)

__all__ = ["public_router", "router"]
