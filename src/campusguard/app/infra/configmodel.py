"""`ConfigModel`: the base of every config section, here so that the modules that declare a section
next to what it configures (a sink in `campusguard.app.alerts`) do not import the config package
(which collects them: `campusguard.app.config` re-exports it from `campusguard.app.config.base`)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

__all__ = ["ConfigModel", "NameText", "printable", "text_problem"]


class ConfigModel(BaseModel):
    """Base of every section: unknown keys are errors and defaults are validated too."""

    model_config = ConfigDict(extra="forbid", validate_default=True)


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""Control characters (C0, DEL, C1), the Unicode line and paragraph separators and the bidi overrides."""


def text_problem(value: str) -> str | None:
    """Why ``value`` is not plain one-line text (its first control character, escaped), or None."""
    found = _CONTROL.search(value)
    if found is None:
        return None
    return (
        f"must be plain text without control characters: {found.group(0)!r} at position {found.start()} "
        "(line breaks, tabs and escape codes are refused)"
    )


def _plain_text(value: str) -> str:
    problem = text_problem(value)
    if problem:
        raise ValueError(problem)
    return value


NameText = Annotated[str, AfterValidator(_plain_text)]
"""A name people read and that goes into subjects, topics and file names (zones, lines, rules):
plain text, no control characters (a CR/LF in a zone name would forge an email header)."""


def printable(text: str) -> str:
    """``text`` with every character that is not printable written as a Python escape (``\\r``,
    ``\\x1b``, ``\\ud800``): one line, no terminal escapes, encodable anywhere."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
