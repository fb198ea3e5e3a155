"""The sink registry: one `SinkEntry` per alert sink kind, from which every list of kinds is derived.

`SINKS` gives the kinds, the config's ``alerts`` union (`campusguard.app.config.alerts`), the
builder `campusguard.app.engine.wiring` calls, and the files each sink owns (outbox, dead
letters, alert log) that retention looks after.

A new sink kind is one module here (and its test): its section model (a `SinkConfigBase`), its
class and its `SinkEntry` at module level. `SINKS` finds it (`campusguard.plugins.discover` over
this package's modules); no list names it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, Union

from pydantic import BeforeValidator, Discriminator, Tag

from campusguard.app.alerts.protocol import AlertSink
from campusguard.app.alerts.spec import SinkConfigBase, SinkContext, SinkEntry, SinkFiles
from campusguard.errors import InvalidInputError
from campusguard.plugins import discover

__all__ = ["DEFAULT_SINK_KIND", "SINKS", "SinkRegistry", "UnknownSinkKindError"]

DEFAULT_SINK_KIND = "stdout"
"""The kind of a section that names none (the format before sinks had kinds)."""


class UnknownSinkKindError(InvalidInputError):
    """A sink kind no registry entry has."""


class SinkRegistry:
    """Sink entries by kind, in the order given.

    Raises:
        ValueError: two entries of one kind.
    """

    def __init__(self, entries: Iterable[SinkEntry[Any]]) -> None:
        self._entries: dict[str, SinkEntry[Any]] = {}
        for entry in entries:
            if entry.kind in self._entries:
                raise ValueError(f"sink kind {entry.kind!r} is registered twice")
            self._entries[entry.kind] = entry

    def __iter__(self) -> Iterator[SinkEntry[Any]]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, kind: object) -> bool:
        return kind in self._entries

    def with_entry(self, entry: SinkEntry[Any]) -> SinkRegistry:
        """A new registry with ``entry`` added last."""
        return SinkRegistry([*self, entry])

    def kinds(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def entry(self, kind: str) -> SinkEntry[Any]:
        """The entry of ``kind``; `UnknownSinkKindError` listing the known ones otherwise."""
        try:
            return self._entries[kind]
        except KeyError:
            raise UnknownSinkKindError(
                f"unknown alert sink kind {kind!r}; expected {', '.join(self.kinds())}"
            ) from None

    def config_models(self) -> tuple[type[SinkConfigBase], ...]:
        return tuple(e.config for e in self)

    def config_union(self) -> Any:
        """The type of one ``alerts`` item: the section model its ``kind`` names (default ``stdout``)."""
        kinds = self.kinds()

        def tag(value: Any) -> str:
            if isinstance(value, dict):
                return str(value.get("kind", DEFAULT_SINK_KIND))
            return str(getattr(value, "kind", DEFAULT_SINK_KIND))

        def known(value: Any) -> Any:
            if isinstance(value, dict) and value.get("kind", DEFAULT_SINK_KIND) not in kinds:
                raise ValueError(f"unknown alert sink kind {value.get('kind')!r}; expected {', '.join(kinds)}")
            return value

        members = tuple(Annotated[e.config, Tag(e.kind)] for e in self)
        return Annotated[_union(members), Discriminator(tag), BeforeValidator(known)]

    def build(self, cfg: SinkConfigBase, ctx: SinkContext) -> AlertSink:
        """The sink the section ``cfg`` configures."""
        return self.entry(cfg.kind).build(cfg, ctx)

    def files(self, cfg: SinkConfigBase, sqlite: str | Path) -> SinkFiles:
        """The files the sink of section ``cfg`` owns, for the event store's SQLite file ``sqlite``."""
        return self.entry(cfg.kind).files(cfg, Path(sqlite))


def _union(members: tuple[Any, ...]) -> Any:
    return Union[members]  # noqa: UP007 (a runtime tuple of types)


SINKS = SinkRegistry(found.entry for found in discover(__name__.rpartition(".")[0], SinkEntry, exclude=("registry",)))
"""Every alert sink kind of the app: each `SinkEntry` declared in a module of `campusguard.app.alerts`."""
