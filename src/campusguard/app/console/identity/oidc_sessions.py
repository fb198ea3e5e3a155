"""Console sessions made by a campus sign-in, re-checked with the provider while they last.

A session made by `campusguard.app.console.identity.oidc_pages` lives 12 hours by default; the provider may
remove the user, or move them out of every group that maps to a role, long before. `ProviderSessions`
keeps each such session's provider grant (`ProviderGrant`: the access and refresh tokens; in this
process's memory only, never on disk, unless the identity is shared in PostgreSQL) and, at the
first request after ``recheck_s`` has passed, asks the provider again (`OidcSignIn.recheck`). The session ends (revoked in the users database)
when the provider refuses or no group maps any more; a changed role applies at once. A provider
that cannot be reached keeps the session for now and is asked again after `RETRY_S`.

A session of an account tied to a provider whose grant this console does not hold (made before a
restart of the console) is ended at its first request: it cannot be checked, so it fails closed.
Consoles sharing a PostgreSQL database keep the grants there (`provider_grants`): a session made
on one node is checked on whichever node it reaches, one check at a time, and outlives a restart.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import NoReturn

from campusguard.app.console.identity.oidc import Identity, OidcSignIn, SignInRefused
from campusguard.app.console.identity.provider_grants import GrantTable, MemoryGrants, TrackedGrant
from campusguard.app.console.identity.store import IdentityStore
from campusguard.app.console.identity.users import Credential, User

__all__ = ["RETRY_S", "ProviderSessions", "SessionEnded"]

log = logging.getLogger(__name__)

RETRY_S = 60.0
"""Seconds before a provider that could not be reached is asked again about a session."""


class SessionEnded(Exception):
    """The provider no longer vouches for the session's user; the session was revoked."""


class ProviderSessions:
    """The sessions of one console made by its provider's sign-in (thread-safe).

    Args:
        sign_in: the console's `OidcSignIn`.
        users: the identity store (sessions revoked there, roles set there).
        recheck_s: seconds between two checks of one session.
        grants: where the sessions' grants are kept (default: this process's memory; consoles
            sharing a PostgreSQL database share its table, `IdentityStore.provider_grants`).
        clock: wall-clock seconds (a parameter for tests).
    """

    def __init__(
        self,
        sign_in: OidcSignIn,
        users: IdentityStore,
        *,
        recheck_s: float,
        grants: GrantTable | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.sign_in = sign_in
        self.users = users
        self.recheck_s = float(recheck_s)
        self.grants: GrantTable = MemoryGrants() if grants is None else grants
        self._clock = clock
        self._local: set[str] = set()  # sessions of accounts with a console password: nothing to check
        self._lock = threading.Lock()
        self._check_locks = tuple(threading.Lock() for _ in range(64))  # one check of a session at a time here

    def remember(self, token_hash: str, identity: Identity, *, ttl_s: float) -> None:
        """Track the session ``token_hash`` just made for ``identity``, valid ``ttl_s`` seconds (those
        past their end are dropped here)."""
        now = self._clock()
        self.grants.remember(token_hash, TrackedGrant(identity, now + self.recheck_s, now + ttl_s), now=now)

    def forget(self, token_hash: str) -> None:
        self.grants.forget(token_hash)

    def check(self, credential: Credential) -> User:
        """The session's user, after asking the provider when a check is due.

        Raises:
            SessionEnded: the session was revoked (the reason in the message).
        """
        if credential.kind != "session" or credential.token_hash in self._local:
            return credential.user
        tracked = self.grants.get(credential.token_hash)
        if tracked is None:
            if self.users.external_issuer(credential.user.name) is None:
                with self._lock:
                    self._local.add(credential.token_hash)
                return credential.user
            self._end(credential, "the session was made before the console restarted and cannot be re-checked")
        if self._clock() < tracked.next_check:
            return credential.user
        with self._check_locks[hash(credential.token_hash) % len(self._check_locks)]:
            tracked = self.grants.get(credential.token_hash)
            if tracked is None:  # another request ended it meanwhile
                raise SessionEnded("the session ended")
            now = self._clock()
            due = now >= tracked.next_check
            if not due or not self.grants.claim(credential.token_hash, tracked.next_check, now + RETRY_S):
                # another request (of this or another console) checked it meanwhile, or checks it now
                return self.users.get_user(credential.user.name) or credential.user
            return self._recheck(credential, tracked)

    def _recheck(self, credential: Credential, tracked: TrackedGrant) -> User:
        try:
            identity = self.sign_in.recheck(tracked.identity)
        except SignInRefused as exc:
            if exc.status == 502:  # the provider cannot be asked now: keep the session, ask again soon
                log.warning(
                    "campus sign-in of %s not re-checked: %s; asked again in %.0f s", credential.user.name, exc, RETRY_S
                )
                self.grants.update(credential.token_hash, tracked.identity, self._clock() + RETRY_S)
                return credential.user
            self._end(credential, str(exc))
        self.grants.update(credential.token_hash, identity, self._clock() + self.recheck_s)
        user = credential.user
        if identity.role != user.role:
            try:
                user = self.users.set_role(user.name, identity.role)
            except (KeyError, ValueError) as exc:
                self._end(credential, f"the role could not be set ({exc})")
            self.users.audit(user.name, "role.oidc", user.name, role=identity.role, previous_role=credential.user.role)
        return user

    def _end(self, credential: Credential, reason: str) -> NoReturn:
        self.forget(credential.token_hash)
        self.users.revoke(credential.token_hash)
        self.users.audit(credential.user.name, "logout.oidc", credential.user.name, reason=reason)
        log.warning("campus sign-in session of %s ended: %s", credential.user.name, reason)
        raise SessionEnded(reason)
