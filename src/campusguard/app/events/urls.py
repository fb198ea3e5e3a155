"""PostgreSQL URLs as CampusGuard checks and shows them: no I/O, no psycopg, never a password."""

from __future__ import annotations

from urllib.parse import urlsplit

from campusguard.app.infra.secrets import redact_url

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


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (libpq's messages span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__
