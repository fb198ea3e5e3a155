"""Plugins by discovery: the entries (a rule kind, an alert sink, a backend) that the modules of a package
declare at module level, found with `pkgutil` over the package's folder, as Frigate finds its detectors
(``frigate/detectors/detector_types.py``).

A registry calls `discover` once, at its own import: a new kind is one module dropped into the folder,
and no list names it. Each entry may carry an ``order`` (an int): entries with one come first, by it,
then the others; ties and unordered entries go by module name, then by their place in the module, so
the order of kinds is the same in every process.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Found", "discover"]

T = TypeVar("T")


@dataclass(frozen=True)
class Found(Generic[T]):
    """One entry: the module that declares it, the name it has there, and the entry itself."""

    module: str
    name: str
    entry: T


def _order_key(found: Found[T], position: int) -> tuple[bool, int, str, int]:
    order = getattr(found.entry, "order", None)
    return (order is None, order if isinstance(order, int) else 0, found.module, position)


def discover(
    package: str, entry_type: type[T], *, include: Callable[[str], bool] | None = None, exclude: tuple[str, ...] = ()
) -> list[Found[T]]:
    """Every ``entry_type`` instance declared at the top level of a module of ``package``, in order.

    Args:
        package: the dotted name of the package whose modules are searched (not its sub-packages).
        entry_type: the class of the entries (``RuleEntry``, ``SinkEntry``, ``BackendSpec``).
        include: which module names (the last dotted part) may hold entries; default every one.
        exclude: module names never imported (the registry that calls this, modules that import it).

    An entry imported by a second module is counted once, for the first module (by name) that holds it.
    A module that fails to import raises: a broken plugin is an error, never a kind that silently vanishes.
    """
    paths = importlib.import_module(package).__path__
    found: list[tuple[Found[T], int]] = []
    seen: set[int] = set()
    for info in sorted(pkgutil.iter_modules(paths), key=lambda m: m.name):
        if info.ispkg or info.name.startswith("_") or info.name in exclude:
            continue
        if include is not None and not include(info.name):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        for position, (name, value) in enumerate(vars(module).items()):
            if isinstance(value, entry_type) and id(value) not in seen:
                seen.add(id(value))
                found.append((Found(module.__name__, name, value), position))
    found.sort(key=lambda pair: _order_key(*pair))
    return [f for f, _ in found]
