"""The audit log (admin only): filtered pages, newest first, and the choices of its filters."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Depends, Query, Request

from campusguard.app.console.identity.auth import console_state, require_role
from campusguard.app.console.schemas import AuditFacets, AuditPage

router = APIRouter(tags=["audit"], dependencies=[Depends(require_role("admin"))])


@router.get("/audit")
def list_audit(
    request: Request,
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=10**9),
    user: str | None = Query(None, max_length=64, description="Only this user's entries."),
    action: str | None = Query(
        None, max_length=64, description="Only this action (`event.acknowledge`), or a prefix ending in `.` (`event.`)."
    ),
    since: datetime | None = Query(None, description="At or after (ISO 8601; naive = UTC)."),
    until: datetime | None = Query(None, description="Before (ISO 8601; naive = UTC)."),
) -> AuditPage:
    """Recorded state changes, newest first: who, when, what, on which target; and how many match."""
    entries, total = console_state(request).users.audit_entries(
        limit=limit, offset=offset, user=user or None, action=action or None, since=since, until=until
    )
    return AuditPage(items=entries, total=total)


@router.get("/audit/facets")
def audit_facets(request: Request) -> AuditFacets:
    """The users and actions the audit log names (the choices of the audit page's filters)."""
    users, actions = console_state(request).users.audit_facets()
    return AuditFacets(users=users, actions=actions)
