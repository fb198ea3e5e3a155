"""Secrets have one owner: this module knows which config values are secret and how every way out
(logs, thread names, dead letters, ledger keys, evidence bundles, reports, ``--json``) shows them.

What is secret:

- a field whose name says so (`is_secret_field`: ``password``, ``client_secret``, ``token``,
  ``api_key``, ...) and the values of a ``headers`` mapping (an ``Authorization`` header);
- in a URL: the password of its user info (``rtsp://cam:***@host/...``: the user name stays, it
  says which account), the values of query parameters whose name says so (``?token=***``), and
  path segments that look like a token (20 or more letters, digits, ``-`` and ``_`` with a digit
  in them: a Slack-style ``/services/T0/B0/<token>``).

`redact_url` and `redact_text` show a URL or any text without them; `redact_mapping` a config
mapping; `redact_config_yaml` a config file's text (comments and lines kept). Every secret the
config holds, and every one read from an environment variable or a file (`resolve_secret`), is
also remembered (`remember_secret`), so `RedactingFilter` (on the CLI's log handler) takes it out
of any log line, whatever module formatted it. Pure apart from that process-wide set; no app imports.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

import numpy as np

from campusguard.errors import ConfigError

__all__ = [
    "MASK",
    "RedactingFilter",
    "install_log_redaction",
    "is_secret_field",
    "known_secrets",
    "redact_config_yaml",
    "redact_mapping",
    "redact_text",
    "redact_url",
    "remember_secret",
    "resolve_secret",
    "secret_values",
    "url_userinfo",
    "with_password",
    "without_userinfo",
]

MASK = "***"

_SECRET_FIELD = re.compile(
    r"(^|_)(password|passwd|passphrase|pwd|secret|client_secret|token|access_token|refresh_token|api_?key|"
    r"private_key|credentials?)$",
    re.IGNORECASE,
)
"""Field names whose value is a secret (``password``, ``mqtt_password``, ``client_secret``); not
``password_env``/``password_file`` (they name where the secret is)."""

_SECRET_QUERY = frozenset(
    {
        "password", "passwd", "pass", "pwd", "secret", "client_secret", "token", "access_token",
        "refresh_token", "id_token", "api_key", "apikey", "api-key", "key", "sig", "signature",
        "auth", "authorization", "code", "session", "sessionid", "private_token", "x-api-key",
        "credential", "credentials", "user_password",
    }
)  # fmt: skip
"""Query parameter names whose value is a secret (``?token=...``, ``?sig=...`` of a signed URL)."""

_TOKEN_SEGMENT = re.compile(r"^(?=.*\d)[A-Za-z0-9_\-]{20,}$")
_URL_IN_TEXT = re.compile(r"""[A-Za-z][A-Za-z0-9+.\-]{1,15}://[^\s'"<>`]+""")
_QUERY_IN_TEXT = re.compile(r"([?&])([A-Za-z_][A-Za-z0-9_.\-]{0,63})=(?!\*\*\*)([^&\s'\"<>#]+)")
_MIN_REMEMBERED = 4  # shorter values are not searched for in free text (they would mask ordinary words)

_known: set[str] = set()
_known_lock = threading.Lock()


def is_secret_field(name: str) -> bool:
    """True when a config field of this name holds a secret itself (``password``, ``client_secret``)."""
    return bool(_SECRET_FIELD.search(name))


def _secret_query_name(name: str) -> bool:
    return name.lower() in _SECRET_QUERY or is_secret_field(name)


def redact_url(url: str) -> str:
    """``url`` with its secrets replaced by ``***``: the password of its user info, secret query
    values and token-like path segments (``rtsp://cam:***@host/stream``). Text that is no URL
    comes back unchanged."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return re.sub(r"(//[^/:@\s]*):[^@/\s]*@", rf"\1:{MASK}@", url)
    if not parts.scheme or not parts.netloc:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{hostport}" if colon else f"{MASK}@{hostport}" if _looks_like_token(user) else netloc
    path = "/".join(MASK if _looks_like_token(unquote(seg)) else seg for seg in parts.path.split("/"))
    query = parts.query
    if query:
        pairs = []
        for item in query.split("&"):
            name, eq, value = item.partition("=")
            secret = eq and value and _secret_query_name(unquote(name))
            pairs.append(f"{name}={MASK}" if secret else item)
        query = "&".join(pairs)
    fragment = parts.fragment
    if fragment and "=" in fragment:  # an implicit-flow style #access_token=...
        fragment = "&".join(
            f"{k}={MASK}" if _secret_query_name(k) else f"{k}={quote(v, safe='')}"
            for k, v in parse_qsl(fragment, keep_blank_values=True)
        )
    return urlunsplit((parts.scheme, netloc, path, query, fragment))


def _looks_like_token(segment: str) -> bool:
    return bool(_TOKEN_SEGMENT.match(segment))


def url_userinfo(url: str) -> tuple[str | None, str | None]:
    """The user name and password of a URL's user info, percent-decoded (``(None, None)`` without)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None, None
    user = unquote(parts.username) if parts.username is not None else None
    password = unquote(parts.password) if parts.password is not None else None
    return user, password


def without_userinfo(url: str) -> str:
    """``url`` without ``user:password@`` (what goes on the wire when the user info travels as a header)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query, parts.fragment))


def with_password(url: str, password: str) -> str:
    """``url`` with ``password`` as its user info's password (the user name kept; percent-encoded)."""
    parts = urlsplit(url)
    user = parts.username or ""
    hostport = parts.netloc.rpartition("@")[2]
    netloc = f"{user}:{quote(password, safe='')}@{hostport}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def redact_text(text: str) -> str:
    """Any text (a log line, an exception's message) with every URL in it redacted (`redact_url`) and
    every remembered secret (`remember_secret`) replaced by ``***``."""
    if not text:
        return text
    out = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text) if "://" in text else text
    if "=" in out:  # a path with its query and no scheme (an access log's "GET /callback?code=...")
        out = _QUERY_IN_TEXT.sub(
            lambda m: m.group(0) if not _secret_query_name(m.group(2)) else f"{m.group(1)}{m.group(2)}={MASK}", out
        )
    for secret in known_secrets():
        if secret in out:
            out = out.replace(secret, MASK)
    return out


def _url_secrets(url: str) -> set[str]:
    found: set[str] = set()
    try:
        parts = urlsplit(url)
    except ValueError:
        return found
    if not parts.scheme or not parts.netloc:
        return found
    _user, password = url_userinfo(url)
    if password:
        found.add(password)
        found.add(parts.password or "")
    for seg in parts.path.split("/"):
        if _looks_like_token(unquote(seg)):
            found.update({seg, unquote(seg)})
    for item in parts.query.split("&") if parts.query else ():
        name, _eq, value = item.partition("=")
        if value and _secret_query_name(unquote(name)):
            found.update({value, unquote(value)})
    return {s for s in found if s}


def _without_text(items: list[Any] | tuple[Any, ...]) -> bool:
    """True when ``items`` are numbers or lists of numbers (a polygon): NumPy makes them one array of
    numbers in C; a string, a mapping or anything else gives another kind of array (or none)."""
    try:
        return np.asarray(items).dtype.kind in "biuf"
    except (TypeError, ValueError):  # ragged: looked at item by item
        return False


def secret_values(data: Any, *, field: str = "") -> set[str]:
    """Every secret in a config mapping (as parsed from YAML): the values of secret fields and of
    ``headers`` mappings, and the secrets inside URLs anywhere in it."""
    found: set[str] = set()
    if isinstance(data, Mapping):
        for key, value in data.items():
            name = str(key)
            if name.lower() == "headers" and isinstance(value, Mapping):
                found.update(str(v) for v in value.values() if isinstance(v, str | int) and str(v))
                continue
            if is_secret_field(name) and isinstance(value, str | int) and not isinstance(value, bool) and str(value):
                found.add(str(value))
                continue
            found |= secret_values(value, field=name)
    elif isinstance(data, list | tuple):
        if data and not isinstance(data[0], Mapping) and _without_text(data):
            return found  # numbers only (a polygon's thousands of them): no secret
        for item in data:
            found |= secret_values(item, field=field)
    elif isinstance(data, str) and "://" in data:
        found |= _url_secrets(data)
    found.discard(MASK)  # already redacted
    return found


def redact_mapping(data: Any) -> Any:
    """A copy of a config mapping with every secret shown as ``***`` (`secret_values`'s rules)."""
    if isinstance(data, Mapping):
        out: dict[Any, Any] = {}
        for key, value in data.items():
            name = str(key)
            if name.lower() == "headers" and isinstance(value, Mapping):
                out[key] = {k: MASK for k in value}
            elif is_secret_field(name) and value is not None and not isinstance(value, bool) and str(value):
                out[key] = MASK
            else:
                out[key] = redact_mapping(value)
        return out
    if isinstance(data, list | tuple):
        return [redact_mapping(item) for item in data]
    if isinstance(data, str) and "://" in data:
        return redact_url(data)
    return data


def remember_secret(*values: str | None) -> None:
    """Remember secrets so `redact_text` (and the log filter) take them out of free text."""
    with _known_lock:
        _known.update(v for v in values if v and len(v) >= _MIN_REMEMBERED)


def known_secrets() -> tuple[str, ...]:
    """The remembered secrets, longest first."""
    with _known_lock:
        return tuple(sorted(_known, key=len, reverse=True))


def remember_config_secrets(data: Any) -> None:
    """Remember every secret of a config mapping (`secret_values`)."""
    remember_secret(*secret_values(data))


def resolve_secret(
    value: str | None, env: str | None, file: str | None, what: str, *, required: bool = False
) -> str | None:
    """The secret of a config field given inline (``value``), by environment variable name
    (``env``) or by file (``file``, its first line, trailing newline dropped); at most one of them.
    The secret is remembered (`remember_secret`).

    Raises:
        ConfigError: more than one given, the variable unset, the file unreadable, or none given
            when ``required`` (each message names ``what``).
    """
    given = [n for n, v in (("inline", value), ("env", env), ("file", file)) if v]
    if len(given) > 1:
        raise ConfigError(f"{what}: give the secret one way only (inline, *_env or *_file), got {' and '.join(given)}")
    secret = value
    if env:
        secret = os.environ.get(env)
        if secret is None:
            raise ConfigError(f"{what}: the environment variable {env} is not set")
    elif file:
        try:
            secret = Path(file).read_text(encoding="utf-8").splitlines()[0] if Path(file).stat().st_size else ""
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{what}: cannot read the secret file {file}: {type(exc).__name__}") from None
    if required and not secret:
        raise ConfigError(f"{what}: no secret given")
    remember_secret(secret)
    return secret


class RedactingFilter(logging.Filter):
    """A handler filter: each record's message (and traceback text) goes out through `redact_text`."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        return True


def install_log_redaction(handlers: Iterable[logging.Handler]) -> None:
    """Put a `RedactingFilter` on each handler (once)."""
    for handler in handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())


def redact_config_yaml(text: str) -> str:
    """A config file's YAML text as it may leave the site (an evidence bundle): every scalar that
    holds a secret (`secret_values`) rewritten in place as a quoted string with the secret ``***``,
    so comments and line numbers are kept; should a secret still be found after that, the redacted
    mapping (`redact_mapping`) dumped as plain YAML instead. Text that is not YAML comes back as a
    one-line note."""
    import json

    import yaml

    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return "# the config file could not be read as YAML; it is left out of this copy\n"
    found = sorted(secret_values(data), key=len, reverse=True)
    spans: list[tuple[int, int, str]] = []
    stack: list[Any] = [] if root is None else [root]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.ScalarNode):
            value = str(node.value)
            clean = value
            for secret in found:
                clean = clean.replace(secret, MASK)
            if clean != value:
                spans.append((node.start_mark.index, node.end_mark.index, json.dumps(clean, ensure_ascii=False)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(v for pair in node.value for v in pair)
    out = text
    for begin, end, replacement in sorted(spans, reverse=True):
        out = out[:begin] + replacement + out[end:]
    try:
        leaked = secret_values(yaml.safe_load(out)) or any(secret in out for secret in found)
    except yaml.YAMLError:
        leaked = True
    if leaked:
        body = yaml.safe_dump(redact_mapping(data), sort_keys=False, allow_unicode=True)
        return "# secrets redacted (***); comments of the original file are not kept\n" + body
    return out
