"""Where the console keeps the campus sign-in's sessions between their checks with the provider.

`campusguard.app.console.identity.oidc_sessions.ProviderSessions` asks the provider about each session it
made now and then; what it needs for that (the `Identity` with the provider's grant, and when
the next check is due) is a `TrackedGrant` in a `GrantTable`. One console keeps them in its
memory (`MemoryGrants`, never on disk: a restart ends those sessions at their next request).
Consoles that share a PostgreSQL database keep them there
(`campusguard.app.console.identity.postgres.PostgresGrants`), so a session made on one node is
checked, and goes on, on every node; `GrantTable.claim` lets one request of one node ask the
provider at a time (a refresh token used twice may be refused by a provider that rotates them).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

from campusguard.app.console.identity.oidc import Identity

__all__ = ["TrackedGrant", "GrantTable", "MemoryGrants"]


@dataclass(frozen=True)
class TrackedGrant:
    """One session's provider user and grant, when it is next checked and when it ends (wall-clock s)."""

    identity: Identity
    next_check: float
    expires_at: float


class GrantTable(Protocol):
    """The tracked sessions of one console, or of every console sharing a database (by token hash)."""

    def remember(self, token_hash: str, grant: TrackedGrant, *, now: float) -> None:
        """Keep ``grant`` for the session (those that ended before ``now`` may be dropped)."""
        ...

    def get(self, token_hash: str) -> TrackedGrant | None:
        """The session's grant, or ``None`` when it is not tracked (here)."""
        ...

    def claim(self, token_hash: str, seen_next_check: float, until: float) -> bool:
        """Move the next check to ``until`` if it still is ``seen_next_check``: True for the one caller
        that may ask the provider now."""
        ...

    def update(self, token_hash: str, identity: Identity, next_check: float) -> None:
        """The provider's latest answer about the session, and when to ask next."""
        ...

    def forget(self, token_hash: str) -> None: ...


class MemoryGrants:
    """A `GrantTable` in this process's memory (thread-safe)."""

    def __init__(self) -> None:
        self._grants: dict[str, TrackedGrant] = {}
        self._lock = threading.Lock()

    def remember(self, token_hash: str, grant: TrackedGrant, *, now: float) -> None:
        with self._lock:
            for old in [h for h, g in self._grants.items() if g.expires_at <= now]:
                del self._grants[old]
            self._grants[token_hash] = grant

    def get(self, token_hash: str) -> TrackedGrant | None:
        with self._lock:
            return self._grants.get(token_hash)

    def claim(self, token_hash: str, seen_next_check: float, until: float) -> bool:
        with self._lock:
            grant = self._grants.get(token_hash)
            if grant is None or grant.next_check != seen_next_check:
                return False
            self._grants[token_hash] = TrackedGrant(grant.identity, until, grant.expires_at)
            return True

    def update(self, token_hash: str, identity: Identity, next_check: float) -> None:
        with self._lock:
            grant = self._grants.get(token_hash)
            if grant is not None:
                self._grants[token_hash] = TrackedGrant(identity, next_check, grant.expires_at)

    def forget(self, token_hash: str) -> None:
        with self._lock:
            self._grants.pop(token_hash, None)
