"""Where a bad value sits in the YAML file: the line of a field, and pydantic errors as one message.

Pydantic names a bad field by its location (``("cameras", 0, "zones", 1, "polygon")``); the
YAML node tree (`yaml.compose`) knows the line of every key and item. `line_of` walks the two
together, `first_error` turns a `ValidationError` into one location and one plain message.
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import ValidationError

from campusguard.app.config.base import Loc
from campusguard.app.config.rules import RULE_KINDS

__all__ = ["dotted", "first_error", "line_of"]

_KINDS = ", ".join(RULE_KINDS[:-1]) + " or " + RULE_KINDS[-1]


def dotted(loc: Loc) -> str:
    """``cameras[0].zones[1].polygon`` for ``("cameras", 0, "zones", 1, "polygon")``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def line_of(root: yaml.Node | None, loc: Loc) -> int | None:
    """1-based line of the deepest YAML node reachable along ``loc`` (None without a node tree)."""
    node = root
    line = None if node is None else node.start_mark.line + 1
    for part in loc:
        child = None
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == part:
                    child = value
                    line = key.start_mark.line + 1
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is None:
            continue  # discriminator tags and union branches in pydantic's loc have no node
        node = child
        if not isinstance(node, yaml.MappingNode):
            line = node.start_mark.line + 1
    return line


def _has(node: Any, part: int | str) -> bool:
    """Whether the parsed YAML ``node`` has a key or index ``part``."""
    if isinstance(node, dict):
        return part in node
    return isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)


def _clean_loc(loc: tuple[int | str, ...], data: Any) -> Loc:
    """Keep the parts of pydantic's ``loc`` that exist in the data; drop union-branch labels (``'intrusion'``, ``'int'``)."""
    out: list[int | str] = []
    node = data
    for part in loc:
        if _has(node, part):
            node = node[part]
            out.append(part)
    return tuple(out)


def first_error(exc: ValidationError, data: Any) -> tuple[Loc, str]:
    """The location (in ``data``, the parsed YAML) and a one-line message of the first problem."""
    errs = exc.errors(include_url=False)
    err = errs[0]
    loc = _clean_loc(tuple(err["loc"]), data)
    same = [e for e in errs if _clean_loc(tuple(e["loc"]), data) == loc]
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = f"unknown key {loc[-1]!r}" if loc else "unknown key"
    elif err["type"] == "union_tag_invalid":
        kind = err["input"].get("kind") if isinstance(err.get("input"), dict) else None
        msg = f"unknown rule kind {kind!r}; expected {_KINDS}"
    elif err["type"] == "union_tag_not_found":
        msg = f"a rule needs `kind`: {_KINDS}"
    elif len(same) > 1:  # one error per union branch (e.g. int | str): say them together
        msg = f"invalid value {err.get('input')!r}: " + " or ".join(dict.fromkeys(e["msg"].lower() for e in same))
    msg = msg.removeprefix("Value error, ")
    more = exc.error_count() - len(same)
    if more > 0:
        msg += f" (and {more} more problem{'s' if more > 1 else ''})"
    return loc, msg
