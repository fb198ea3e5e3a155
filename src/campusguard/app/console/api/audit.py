"""The audit log (admin only)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request

from campusguard.app.console.auth import console_state, require_role
from campusguard.app.console.schemas import AuditPage

router = APIRouter(tags=["audit"], dependencies=[Depends(require_role("admin"))])


@router.get("/audit")
def list_audit(
    request: Request, limit: int = Query(100, ge=1, le=1000), offset: int = Query(0, ge=0, le=10**9)
) -> AuditPage:
    """Recorded state changes, newest first: who, when, what, on which target."""
    entries, total = console_state(request).users.audit_entries(limit=limit, offset=offset)
    return AuditPage(items=entries, total=total)
