"""`Escalator`: one ``escalation`` alert for an incident nobody acknowledged in time.

A rule with ``escalate: {after_s, to: [sink names]}`` gives each of its incidents a deadline when
it starts: ``after_s`` after its wall-clock start. The deadline is kept in a SQLite file beside the
event store (``<store>.escalations.db``), so a restart keeps it (a deadline passed while the
process was down fires at the next start). When it passes, the incident's review state is read
from the event store, which the console (another process) writes: acknowledged or resolved, the
deadline is dropped; otherwise the incident goes once, as an update of phase ``escalation``, to
the named sinks (whatever phases they report).

Once: a fired deadline is marked done in the same file (and the durable sinks' outboxes keep each
``(event_id, "escalation")`` once), so a replayed start does not fire it again.

Where the deadlines are kept is a `Deadlines`: `SqliteDeadlines` (the file above) or, when the
event store is PostgreSQL, the table every node shares
(`campusguard.app.alerts.postgres.deadlines.PgDeadlines`), whose `Deadlines.settle` claims each
passed deadline (``FOR UPDATE SKIP LOCKED``) while it is settled: a deadline set by a node that
died fires on a survivor, once.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from campusguard.app.alerts.protocol import AlertSink
from campusguard.app.events.protocols import StoreUnavailableError
from campusguard.app.events.types import ESCALATION, Event
from campusguard.app.infra.throttle import OutageLog
from campusguard.errors import InvalidInputError

__all__ = ["Deadlines", "EscalationRule", "Escalator", "Settle", "SqliteDeadlines", "escalations_path_for"]

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS escalations (
    event_id TEXT PRIMARY KEY,
    due      REAL NOT NULL,
    targets  TEXT NOT NULL,
    event    TEXT NOT NULL,
    done     INTEGER NOT NULL DEFAULT 0,
    outcome  TEXT
);
CREATE INDEX IF NOT EXISTS escalations_due ON escalations (done, due);
"""
_KEEP_DONE_S = 90 * 86400.0
_SETTLED = ("acknowledged", "resolved")

ReviewState = Callable[[str], "str | None"]
"""``event_id -> review state`` (``open``, ``acknowledged``, ``resolved``) or None when unknown."""


Settle = Callable[[str, "list[str]", str], "str | None"]
"""``(event_id, target sink names, event JSON) -> outcome``: settle one passed deadline (send its
escalation, or see it acknowledged) and say how (``escalation``, ``acknowledged``, ``resolved``);
None: not now (the store cannot be read), the deadline stays."""


class Deadlines(Protocol):
    """Where the escalation deadlines are kept (`SqliteDeadlines`, `PgDeadlines`)."""

    def add(self, event_id: str, due: float, targets: Sequence[str], event_json: str) -> None:
        """Set an incident's deadline (wall clock) unless it has one (a replayed start keeps the first)."""
        ...

    def pending(self) -> int:
        """Deadlines not settled yet."""
        ...

    def settle(self, now: float, settle: Settle) -> None:
        """Call ``settle`` on each deadline passed by ``now``, oldest first, and mark it done with the
        outcome it returns; stop at the first None."""
        ...

    def close(self) -> None: ...


class SqliteDeadlines:
    """The deadlines in a SQLite file (WAL, ``synchronous=FULL``), for one process.

    Raises:
        InvalidInputError: the file cannot be opened.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
            self._db.execute("DELETE FROM escalations WHERE done = 1 AND due < ?", (time.time() - _KEEP_DONE_S,))
        except sqlite3.Error as exc:
            raise InvalidInputError(f"escalation deadlines {self.path}: cannot open: {exc}") from None

    def add(self, event_id: str, due: float, targets: Sequence[str], event_json: str) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO escalations (event_id, due, targets, event) VALUES (?, ?, ?, ?)",
                (event_id, due, json.dumps(list(targets)), event_json),
            )

    def pending(self) -> int:
        with self._lock:
            (n,) = self._db.execute("SELECT COUNT(*) FROM escalations WHERE done = 0").fetchone()
        return int(n)

    def settle(self, now: float, settle: Settle) -> None:
        with self._lock:
            rows = self._db.execute(
                "SELECT event_id, targets, event FROM escalations WHERE done = 0 AND due <= ? ORDER BY due", (now,)
            ).fetchall()
        for event_id, targets, payload in rows:
            outcome = settle(str(event_id), list(json.loads(targets)), str(payload))
            if outcome is None:
                return
            with self._lock:
                self._db.execute(
                    "UPDATE escalations SET done = 1, outcome = ? WHERE event_id = ?", (outcome, event_id)
                )

    def close(self) -> None:
        with self._lock:
            self._db.close()


def escalations_path_for(store_sqlite: str | Path) -> Path:
    """The deadlines file of the event store whose SQLite file is ``store_sqlite``."""
    return Path(store_sqlite).with_suffix(".escalations.db")


@dataclasses.dataclass(frozen=True)
class EscalationRule:
    """A rule's escalation: seconds an incident may stay unacknowledged, and the sinks told."""

    after_s: float
    to: tuple[str, ...]


class Escalator:
    """Keep the deadlines of escalating rules' incidents and send one escalation past each.

    It is an alert sink itself (``send`` takes every stored update; only starts of escalating
    rules matter), so the event worker feeds it like the others.

    Args:
        deadlines: where the deadlines are kept: a `Deadlines`, or the path of a SQLite file
            (`SqliteDeadlines`; its folder is created).
        rules: ``{(camera_id, rule_name): EscalationRule}``.
        targets: the alert sinks by name (every name in ``rules`` must be here).
        review_state: reads an incident's review state from the event store.
        tick_s: how often deadlines are checked (seconds).

    Attributes:
        escalated: escalations sent; cancelled: deadlines dropped because the incident was acknowledged.

    Raises:
        InvalidInputError: the file cannot be opened, or a rule names a sink not in ``targets``.
    """

    def __init__(
        self,
        deadlines: Deadlines | str | Path,
        rules: Mapping[tuple[str, str], EscalationRule],
        targets: Mapping[str, AlertSink],
        review_state: ReviewState,
        *,
        tick_s: float = 0.5,
    ) -> None:
        missing = sorted({n for r in rules.values() for n in r.to} - set(targets))
        if missing:
            raise InvalidInputError(f"escalation: no alert sink named {', '.join(missing)}")
        self.deadlines = SqliteDeadlines(deadlines) if isinstance(deadlines, str | Path) else deadlines
        self.rules = dict(rules)
        self.targets = dict(targets)
        self.review_state = review_state
        self.tick_s = float(tick_s)
        self.escalated = 0
        self.cancelled = 0
        self._outage = OutageLog(log, "escalation deadlines")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="escalation", daemon=True)
        self._thread.start()

    def send(self, event: Event) -> None:
        """Give a starting incident of an escalating rule its deadline (once: a replay keeps the first)."""
        if event.phase != "start":
            return
        rule = self.rules.get((event.camera_id, event.rule_name))
        if rule is None:
            return
        started = event.started_at.timestamp() if event.started_at is not None else time.time()
        self.deadlines.add(event.event_id, started + rule.after_s, rule.to, json.dumps(event.to_dict(), default=str))

    def pending(self) -> int:
        """Deadlines not passed yet."""
        return self.deadlines.pending()

    def check(self, now: float | None = None) -> int:
        """Settle every deadline passed by ``now`` (wall clock); return how many escalations were sent."""
        now = time.time() if now is None else now
        sent = 0

        def settle(event_id: str, targets: list[str], payload: str) -> str | None:
            nonlocal sent
            try:
                state = self.review_state(event_id)
            except Exception as exc:  # the store is down: try again at the next tick
                log.warning("escalation of %s waits: cannot read its review state (%s)", event_id, exc)
                return None
            if state in _SETTLED:
                self.cancelled += 1
                return str(state)
            event = dataclasses.replace(Event.from_dict(json.loads(payload)), phase=ESCALATION)
            self._deliver(event, targets)
            self.escalated += 1
            sent += 1
            return ESCALATION

        self.deadlines.settle(now, settle)
        return sent

    def _deliver(self, event: Event, names: Sequence[str]) -> None:
        log.warning(
            "incident %s (%s on %s) not acknowledged in time: escalated to %s",
            event.event_id,
            event.rule_name,
            event.camera_id,
            ", ".join(names),
        )
        for name in names:
            sink = self.targets.get(name)
            if sink is None:
                continue
            try:
                sink.send(event)
            except StoreUnavailableError:
                raise  # the sink's shared outbox is unreachable: the deadline stays, settled at a later tick
            except Exception:
                log.exception("escalation of %s to sink %s failed", event.event_id, name)

    def _run(self) -> None:
        while not self._stop.wait(self.tick_s):
            try:
                self.check()
                self._outage.up("settled again")
            except (sqlite3.Error, StoreUnavailableError) as exc:
                self._outage.down(f"cannot be settled ({exc})")
            except Exception:  # a fault of ours: said, never the end of the escalations
                log.exception("escalation deadlines: unexpected error; checking goes on")

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop checking (the deadlines stay for the next run or another node)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout_s)
        self.deadlines.close()
