"""PostgreSQL URLs as CampusGuard checks and shows them: no I/O, no psycopg, never a password."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["POSTGRES_SCHEMES", "is_postgres_url", "postgres_url_problem", "redact_url", "one_line"]

POSTGRES_SCHEMES = ("postgresql", "postgres")


def is_postgres_url(text: str) -> bool:
    """True if ``text`` starts with ``postgresql://`` or ``postgres://`` (any case)."""
    return any(text.lower().startswith(f"{s}://") for s in POSTGRES_SCHEMES)


def postgres_url_problem(url: str) -> str | None:
    """What is wrong with a PostgreSQL URL as far as can be told without connecting, or ``None``."""
    if not is_postgres_url(url):
        return f"must be a postgresql:// or postgres:// URL, got {redact_url(url)!r}"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if parts.fragment:
        return "must not have a #fragment"
    return None


def redact_url(url: str) -> str:
    """The URL with any password (``user:password@`` or ``?password=``) replaced by ``***``."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostport = netloc.rpartition("@")
            if ":" in userinfo:
                userinfo = userinfo.split(":", 1)[0] + ":***"
            netloc = f"{userinfo}@{hostport}"
        query = parts.query
        if query:
            pairs = [(k, "***" if k.lower() == "password" else v) for k, v in parse_qsl(query, keep_blank_values=True)]
            query = urlencode(pairs, safe="*/:%=,")
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return re.sub(r"(//[^/:@]*):[^@/]*@", r"\1:***@", url)


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (libpq's messages span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__
