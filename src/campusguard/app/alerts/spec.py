"""What a sink module declares next to its class: its config section (a `SinkConfigBase`), and a
`SinkEntry` (the section model, the builder, the files it owns); and the `SinkContext` a builder
gets from the config.

Kept apart from `campusguard.app.alerts.registry` so that the sink modules can declare their
entries without importing the registry that collects them, and free of the config package (which
derives its ``alerts`` union from the registry).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TextIO, TypeVar

from pydantic import Field

from campusguard.app.alerts.protocol import AlertSink
from campusguard.app.events.settings import RetrySettings
from campusguard.app.events.types import EVENT_PHASES, LifecyclePhase
from campusguard.app.infra.configmodel import ConfigModel

if TYPE_CHECKING:
    from campusguard.app.alerts.escalation import Deadlines
    from campusguard.app.alerts.ledger import Ledger
    from campusguard.app.alerts.outbox import OutboxStore
    from campusguard.app.alerts.postgres.retained import SiteRetainedState
    from campusguard.app.events.pgsession import RetryPolicy

__all__ = ["SINK_NAME_PATTERN", "SinkConfigBase", "SinkContext", "SinkEntry", "SinkFiles", "sink_kind_of"]

SINK_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
"""A sink's name: letters, digits, ``_ . -`` (it names files beside the event store)."""


def start_and_end() -> list[LifecyclePhase]:
    return ["start", "end"]


def all_phases() -> list[LifecyclePhase]:
    return list(EVENT_PHASES)


class SinkConfigBase(ConfigModel):
    """What every alert sink section has: a name and the phases it reports.

    Each concrete model adds ``kind: Literal["<kind>"]`` with that kind as its default.
    """

    if TYPE_CHECKING:  # declared by every concrete model as a one-value Literal field
        kind: str

    name: str | None = Field(
        None,
        title="Name",
        description="The sink's name, unique among the alert sinks (rules' `escalate.to` point at it); default its kind.",
        pattern=SINK_NAME_PATTERN,
    )
    phases: list[LifecyclePhase] = Field(
        default_factory=start_and_end, title="Phases", description="Event lifecycle phases sent to this sink."
    )

    @property
    def sink_name(self) -> str:
        """``name``, or the kind."""
        return self.name or self.kind


@dataclass(frozen=True)
class SinkFiles:
    """The files a sink owns, beside the event store unless its section names others.

    Attributes:
        outbox: SQLite file of alerts not yet delivered (and of the updates put into it).
        dead_letters: JSON-lines file of alerts given up on (retention expires its lines).
        log: JSON-lines alert log the sink appends to (retention trims it).
    """

    outbox: Path | None = None
    dead_letters: Path | None = None
    log: Path | None = None


@dataclass(frozen=True)
class SinkContext:
    """What a sink's builder needs from the rest of the config.

    Attributes:
        sqlite: the event store's SQLite file: outboxes, the delivery ledger and dead letters
            default to files beside it.
        out: where a stdout sink writes.
        blur: each camera's ``privacy.blur`` (``"none"`` when it shows everything); a sink that
            attaches media picks the redacted variant where it is not ``"none"``.
        public_url: the console's address for links to incidents, or None.
        postgresql: the event store's PostgreSQL URL when the storage is PostgreSQL: the outboxes,
            the delivery ledger, the escalation deadlines and MQTT's retained state counts are then
            its shared tables
            (`campusguard.app.alerts.postgres`), so every node delivers what another left; dead
            letters and alert logs stay files beside ``sqlite``.
        retry: the PostgreSQL calls' back-off (the ``storage.retry`` section); None: the default.

    A builder opens its outbox and ledger through `open_outbox` and `open_ledger`, never a file
    class itself, so the storage decides where they live.
    """

    sqlite: Path
    out: TextIO
    blur: Mapping[str, str] = field(default_factory=dict)
    public_url: str | None = None
    postgresql: str | None = None
    retry: RetrySettings | None = None

    def _retry(self) -> RetryPolicy | None:
        from campusguard.app.events.pgsession import RetryPolicy

        return None if self.retry is None else RetryPolicy.of(self.retry)

    def open_outbox(self, path: Path, name: str, *, what: str, max_messages: int = 100_000) -> OutboxStore:
        """The outbox of the sink ``name``: the SQLite file ``path``, or its rows of the shared
        PostgreSQL table (``path`` unused)."""
        if self.postgresql:
            from campusguard.app.alerts.postgres.outbox import PgOutbox

            return PgOutbox(self.postgresql, name, retry=self._retry(), max_messages=max_messages, what=what)
        from campusguard.app.alerts.outbox import Outbox

        return Outbox(path, max_messages, what=what)

    def open_ledger(self, key: str) -> Ledger:
        """The delivery ledger of the sink ``key``: in `ledger_path`, or the shared PostgreSQL table."""
        if self.postgresql:
            from campusguard.app.alerts.postgres.ledger import PgDeliveryLedger

            return PgDeliveryLedger(self.postgresql, key, retry=self._retry())
        from campusguard.app.alerts.ledger import DeliveryLedger

        return DeliveryLedger(self.ledger_path, key)

    def open_site_state(self, name: str, *, pulse_s: float) -> SiteRetainedState | None:
        """The retained state counts of the MQTT sink ``name`` for the whole site, read from the shared
        PostgreSQL and published by one node (`campusguard.app.alerts.postgres.retained`); None with
        SQLite (the sink counts what it sends)."""
        if not self.postgresql:
            return None
        from campusguard.app.alerts.postgres.retained import SiteRetainedState

        return SiteRetainedState(self.postgresql, name, pulse_s=pulse_s, retry=self._retry())

    def open_deadlines(self) -> Deadlines:
        """The escalation deadlines: ``<store>.escalations.db``, or the shared PostgreSQL table."""
        if self.postgresql:
            from campusguard.app.alerts.postgres.deadlines import PgDeadlines

            return PgDeadlines(self.postgresql, retry=self._retry())

        from campusguard.app.alerts.escalation import SqliteDeadlines, escalations_path_for

        return SqliteDeadlines(escalations_path_for(self.sqlite))

    @property
    def ledger_path(self) -> Path:
        """The delivery ledger every sink shares (`campusguard.app.alerts.ledger.ledger_path_for`)."""
        return self.sqlite.with_suffix(".delivered.db")

    def beside(self, suffix: str) -> Path:
        """A file beside the event store: ``events.db`` -> ``events<suffix>``."""
        return self.sqlite.with_suffix(suffix)


C = TypeVar("C", bound=SinkConfigBase)


def sink_kind_of(model: type[SinkConfigBase]) -> str:
    """The ``kind`` a sink model is told apart by (its ``kind`` field's one value).

    Raises:
        TypeError: the model has no ``kind`` field with a default.
    """
    kind = model.model_fields.get("kind")
    if kind is None or not isinstance(kind.default, str):
        raise TypeError(f"{model.__name__} has no `kind` field with the sink kind as its default")
    return kind.default


def _no_files(cfg: Any, sqlite: Path) -> SinkFiles:
    return SinkFiles()


@dataclass(frozen=True)
class SinkEntry(Generic[C]):
    """One sink kind: everything the app derives its lists of sink kinds from.

    Attributes:
        config: the section's pydantic model; its ``kind`` field's value is the kind.
        build: ``build(section, context) -> AlertSink``: the sink a section configures (it may
            raise `campusguard.errors.CampusGuardError` or `OSError`; the caller names the line).
        files: ``files(section, sqlite) -> SinkFiles``: the files it owns, for the event store's
            SQLite file ``sqlite`` (retention and the docs read them from here).
        example: the fields of a small valid section of the kind (without ``kind``), building a sink
            that needs no server to start; tests and docs configure every kind from it.
        order: where the kind is listed (`campusguard.plugins.discover`: lower first; a kind with
            none comes after those with one, by module name).

    The registry finds every entry declared at the top level of a module of `campusguard.app.alerts`,
    so a new sink is its module (and its test), nothing else.
    """

    config: type[C]
    build: Callable[[C, SinkContext], AlertSink]
    files: Callable[[C, Path], SinkFiles] = _no_files
    example: Mapping[str, Any] = field(default_factory=dict)
    order: int | None = None

    def example_section(self) -> dict[str, Any]:
        """`example` with its ``kind``: one ``alerts`` item."""
        return {"kind": self.kind, **self.example}

    @property
    def kind(self) -> str:
        return sink_kind_of(self.config)
