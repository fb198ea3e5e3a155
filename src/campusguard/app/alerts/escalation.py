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

from campusguard.app.alerts.protocol import AlertSink
from campusguard.app.events.types import ESCALATION, Event
from campusguard.errors import InvalidInputError

__all__ = ["EscalationRule", "Escalator", "escalations_path_for"]

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
        path: the deadlines file (SQLite); its folder is created.
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
        path: str | Path,
        rules: Mapping[tuple[str, str], EscalationRule],
        targets: Mapping[str, AlertSink],
        review_state: ReviewState,
        *,
        tick_s: float = 0.5,
    ) -> None:
        missing = sorted({n for r in rules.values() for n in r.to} - set(targets))
        if missing:
            raise InvalidInputError(f"escalation: no alert sink named {', '.join(missing)}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rules = dict(rules)
        self.targets = dict(targets)
        self.review_state = review_state
        self.tick_s = float(tick_s)
        self.escalated = 0
        self.cancelled = 0
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
            self._db.execute("DELETE FROM escalations WHERE done = 1 AND due < ?", (time.time() - _KEEP_DONE_S,))
        except sqlite3.Error as exc:
            raise InvalidInputError(f"escalation deadlines {self.path}: cannot open: {exc}") from None
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
        with self._lock:
            self._db.execute(
                "INSERT OR IGNORE INTO escalations (event_id, due, targets, event) VALUES (?, ?, ?, ?)",
                (
                    event.event_id,
                    started + rule.after_s,
                    json.dumps(list(rule.to)),
                    json.dumps(event.to_dict(), default=str),
                ),
            )

    def pending(self) -> int:
        """Deadlines not passed yet."""
        with self._lock:
            (n,) = self._db.execute("SELECT COUNT(*) FROM escalations WHERE done = 0").fetchone()
        return int(n)

    def check(self, now: float | None = None) -> int:
        """Settle every deadline passed by ``now`` (wall clock); return how many escalations were sent."""
        now = time.time() if now is None else now
        with self._lock:
            rows = self._db.execute(
                "SELECT event_id, targets, event FROM escalations WHERE done = 0 AND due <= ? ORDER BY due", (now,)
            ).fetchall()
        sent = 0
        for event_id, targets, payload in rows:
            try:
                state = self.review_state(event_id)
            except Exception as exc:  # the store is down: try again at the next tick
                log.warning("escalation of %s waits: cannot read its review state (%s)", event_id, exc)
                return sent
            if state in _SETTLED:
                self._done(event_id, state)
                self.cancelled += 1
                continue
            event = dataclasses.replace(Event.from_dict(json.loads(payload)), phase=ESCALATION)
            self._deliver(event, json.loads(targets))
            self._done(event_id, ESCALATION)
            self.escalated += 1
            sent += 1
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
            except Exception:
                log.exception("escalation of %s to sink %s failed", event.event_id, name)

    def _done(self, event_id: str, outcome: str) -> None:
        with self._lock:
            self._db.execute("UPDATE escalations SET done = 1, outcome = ? WHERE event_id = ?", (outcome, event_id))

    def _run(self) -> None:
        while not self._stop.wait(self.tick_s):
            try:
                self.check()
            except sqlite3.Error as exc:
                log.error("escalation deadlines %s: %s", self.path, exc)

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop checking (the deadlines stay in the file for the next run)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout_s)
        with self._lock:
            self._db.close()
