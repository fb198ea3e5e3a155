"""Device cookies (OWASP "Slow Down Online Guessing Attacks with Device Cookies"): a browser that signed in.

A successful login sets ``cg_device``: for each user who signed in with this browser (the last
`MAX_ENTRIES`), the user name, a random nonce and an expiry (90 days), signed with HMAC-SHA256 under
a server key. At the next login as that user, a valid entry marks the browser as trusted: the login
limits of untrusted browsers (per account, per address) do not delay it; it has a failure count of
its own (per nonce), so a stolen cookie does not buy unlimited guesses either.

The key is 32 random bytes in a file beside the users database (``users.db.device-key``, mode 0600),
created at the first start, so device cookies survive restarts; delete the file to forget every
browser. Pure functions of the key and the clock otherwise.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["DEVICE_COOKIE", "DEVICE_TTL_S", "MAX_ENTRIES", "DeviceCookies", "device_key_beside"]

DEVICE_COOKIE = "cg_device"
DEVICE_TTL_S = 90 * 86400
MAX_ENTRIES = 5
_MAX_COOKIE = 2048


def device_key_beside(users_db: Path) -> bytes:
    """The device-cookie key kept beside the users database (created, mode 0600, when missing)."""
    path = users_db.with_name(users_db.name + ".device-key")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        text = path.read_text(encoding="ascii").strip()
        if len(text) >= 64:
            return bytes.fromhex(text[:64])
        raise ValueError(f"{path.name} does not hold a device-cookie key; delete it to make a new one") from None
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(secrets.token_hex(32) + "\n")
    return device_key_beside(users_db)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class DeviceCookies:
    """Issues and checks ``cg_device`` values.

    Args:
        key: the HMAC key (at least 16 bytes).
        ttl_s: how long an entry stays valid.
        clock: wall-clock seconds (a parameter for tests).
    """

    def __init__(self, key: bytes, *, ttl_s: int = DEVICE_TTL_S, clock: Callable[[], float] = time.time) -> None:
        if len(key) < 16:
            raise ValueError("the device-cookie key needs at least 16 bytes")
        self._key = key
        self.ttl_s = ttl_s
        self._clock = clock

    def _sign(self, payload: str) -> str:
        return _b64(hmac.new(self._key, payload.encode("ascii"), hashlib.sha256).digest())

    def _entries(self, cookie: str | None) -> list[tuple[str, str, str]]:
        """The cookie's valid entries: ``(user, nonce, entry text)``; forged, expired or malformed ones dropped."""
        if not cookie or len(cookie) > _MAX_COOKIE:
            return []
        now = self._clock()
        found = []
        for entry in cookie.split("~")[: MAX_ENTRIES * 2]:
            payload, _, signature = entry.partition(".")
            if not signature or not entry.isascii() or not hmac.compare_digest(signature, self._sign(payload)):
                continue
            try:
                user, nonce, expires = _unb64(payload).decode("utf-8").split("\n")
                if float(expires) <= now:
                    continue
            except ValueError:
                continue
            found.append((user, nonce, entry))
        return found

    def trusted(self, cookie: str | None, user: str) -> str | None:
        """The nonce of the cookie's valid entry for ``user`` (this browser signed in as them), else ``None``."""
        return next((nonce for name, nonce, _ in self._entries(cookie) if name == user), None)

    def after_login(self, cookie: str | None, user: str) -> str:
        """The cookie value to set after ``user`` signed in: a fresh entry for them, first, then the
        other users' valid entries (at most `MAX_ENTRIES` in all)."""
        expires = int(self._clock() + self.ttl_s)
        payload = _b64(f"{user}\n{secrets.token_urlsafe(16)}\n{expires}".encode())
        entries = [f"{payload}.{self._sign(payload)}"]
        entries += [text for name, _, text in self._entries(cookie) if name != user]
        return "~".join(entries[:MAX_ENTRIES])
