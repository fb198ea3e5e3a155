"""Open streams end with their session: the live view (MJPEG) and the event stream (SSE) re-check their caller.

A stream is authorised once, when it opens, and may then run for hours. The users store can change
under it from another process (the ``users remove`` command) or another request (logout, a password
change that ends the other sessions, a demotion), so each stream loop asks `StreamGuard.allowed`
on every turn; at most once per ``interval_s`` that reads the caller's token from the store again.
The stream ends when the token is gone (revoked, expired, its user removed) or the user's role is
now below the role the stream needs (an operator's sharp live view or event stream ends when they
are demoted to viewer; a viewer's redacted one needs only a login). With the default interval of 1 s a stream closes within about 2 s.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from fastapi import Request
from fastapi.concurrency import run_in_threadpool

from campusguard.app.console.identity.store import IdentityStore
from campusguard.app.console.identity.users import Credential, role_at_least

__all__ = ["StreamGuard", "stream_guard"]


class StreamGuard:
    """Whether an open stream's caller may still receive it (the store re-read at most every ``interval_s``).

    Args:
        users: the users store.
        token_hash: the caller's token (as resolved when the stream opened).
        role: the role the stream needs (the caller's role when it opened).
        interval_s: seconds between two reads of the store.
        clock: monotonic seconds (a parameter for tests).
    """

    def __init__(
        self,
        users: IdentityStore,
        token_hash: str,
        role: str,
        *,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._users = users
        self._token_hash = token_hash
        self._role = role
        self._interval_s = interval_s
        self._clock = clock
        self._checked = clock()
        self._ok = True

    def _still_valid(self) -> bool:
        credential: Credential | None = self._users.credential(self._token_hash)
        return credential is not None and role_at_least(credential.user.role, self._role)

    async def allowed(self) -> bool:
        """False (for good) once the token is gone or the role too low; reads the store off the event loop."""
        if not self._ok:
            return False
        now = self._clock()
        if now - self._checked >= self._interval_s:
            self._checked = now
            self._ok = await run_in_threadpool(self._still_valid)
        return self._ok


def stream_guard(request: Request, users: IdentityStore, role: str) -> StreamGuard:
    """The guard of a stream opened by this (authenticated) request: its token and the ``role`` the
    stream needs (``operator`` for a sharp stream, ``viewer`` for a redacted one)."""
    credential: Credential = request.state.credential
    return StreamGuard(users, credential.token_hash, role)
