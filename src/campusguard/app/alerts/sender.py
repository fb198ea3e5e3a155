"""`OutboxSender`: the one thread that drains a durable sink's outbox; `Retry`, what a failed
delivery does to its message; `DeadLetters`, where a message given up on goes.

Every durable sink (email, webhook, MQTT) commits an alert to its `campusguard.app.alerts.outbox.Outbox`
and returns; a sender thread delivers what is due. The thread, its wake-up, its stop and its error
handling are written here once, over either outbox (`campusguard.app.alerts.outbox.OutboxStore`: a
SQLite file, or PostgreSQL tables shared by several nodes): the sink gives one round (``step``) (hand what is due to the network, or
wait for something to be, through `OutboxSender.wait`), and the sender calls it until stopped. An
outbox that cannot be read (a full disk) is said once and tried again each second; any other
error is logged with its traceback and the thread goes on: nothing an alert holds ends the sender.

`Retry` holds the back-off and the dead-letter policy around a failed attempt: the message waits
``backoff_s`` doubled each attempt up to ``backoff_max_s``, and goes to the dead letters once it is
older than ``max_age_s`` or, when ``retries`` is set, after that many failed attempts past the first.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from campusguard.app.events.protocols import StoreUnavailableError
from campusguard.app.infra.backoff import Backoff
from campusguard.app.infra.diskspace import disk_health
from campusguard.app.infra.durable import AppendLog, locked_for_rewrite, replace_durably

if TYPE_CHECKING:
    from campusguard.app.alerts.ledger import Ledger
    from campusguard.app.alerts.outbox import OutboxMessage, OutboxStore
    from campusguard.app.events.types import Event, PhaseFilter

__all__ = ["DeadLetters", "OutboxSender", "Retry"]

log = logging.getLogger(__name__)

_AFTER_ERROR_S = 1.0  # pause after a failed round, so a lasting fault does not spin
_POLL_S = 0.02  # how often `drain` looks whether the work is done
_OUTBOX_ERRORS = (sqlite3.Error, StoreUnavailableError)  # an outbox that cannot be read now (disk, server)


class OutboxSender:
    """A daemon thread calling ``step`` (one round of the delivery) until `stop`; ``step`` waits through `wait`.

    Args:
        name: the thread's name (never a secret: sinks pass their redacted target).
        step: one round of the sink's delivery; it returns after handing work over or waiting.
        what: how log lines name the sink (``email 127.0.0.1:25``).
        outbox: where the outbox is (its file, or its PostgreSQL table), named when it cannot be read.
        after_stop: called on the thread once the rounds are over (MQTT takes its last acknowledgements).
    """

    def __init__(
        self,
        name: str,
        step: Callable[[], None],
        *,
        what: str,
        outbox: Path | str,
        after_stop: Callable[[], None] | None = None,
    ) -> None:
        self.what = what
        self.outbox = outbox
        self._step = step
        self._after_stop = after_stop
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self.thread.start()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def wake(self) -> None:
        """Cut the round's wait short: there is something to send (or an acknowledgement to take)."""
        self._wake.set()

    def wait(self, seconds: float) -> None:
        """Wait up to ``seconds`` for a `wake` (or the stop), then clear the wake-up."""
        self._wake.wait(seconds)
        self._wake.clear()

    def drain(self, done: Callable[[], bool], deadline: float) -> None:
        """Wake the thread until ``done()``, or until the monotonic ``deadline`` (a sink's `close`); an
        outbox that cannot be read (its server down) ends the wait: what it holds stays for later."""
        while time.monotonic() < deadline:
            try:
                if done():
                    return
            except _OUTBOX_ERRORS:
                return
            self._wake.set()
            time.sleep(_POLL_S)

    def stop(self, join_s: float) -> None:
        """End the rounds and wait up to ``join_s`` for the thread."""
        self._stop.set()
        self._wake.set()
        self.thread.join(join_s)

    def put(self, outbox: OutboxStore, event: Event, phases: PhaseFilter, ledger: Ledger | None) -> int:
        """Commit ``event``'s JSON to ``outbox`` once (not a phase the sink skips, nor one ``ledger``
        says was delivered) and wake the thread; the oldest messages dropped for room. Raises
        `TypeError`/`ValueError` for an event that cannot be made into JSON."""
        if not phases.accepts(event) or (ledger is not None and ledger.delivered(event)):
            return 0
        payload = json.dumps(event.to_dict(), default=str).encode("utf-8")
        added, dropped = outbox.add_once(event.event_id, payload, event)
        if added:
            self._wake.set()
        return dropped

    def close_files(
        self, outbox: OutboxStore, dead: DeadLetters, ledger: Ledger | None, *, unsent: str = "alert(s) not sent"
    ) -> int:
        """After `stop`: say what stays in ``outbox`` for the next run, close the sink's files; that count."""
        try:
            left = len(outbox)
        except _OUTBOX_ERRORS as exc:
            log.warning("%s: the outbox %s cannot be read (%s); what it holds is sent later", self.what, outbox.path, exc)
            left = 0
        if left:
            log.warning("%s: %d %s; kept in the outbox %s", self.what, left, unsent, outbox.path)
        outbox.close()
        dead.close()
        if ledger is not None:
            ledger.close()
        return left

    def _run(self) -> None:
        failing = False
        while not self._stop.is_set():
            try:
                self._step()
            except _OUTBOX_ERRORS as exc:  # a full disk, a server down: said once, tried again
                if not failing:
                    log.error("%s outbox %s: %s; delivery resumes when it can be read", self.what, self.outbox, exc)
                failing = True
                self._stop.wait(_AFTER_ERROR_S)
            except Exception:  # a fault of ours: said, never the end of the sender
                log.exception("%s: the sender hit an unexpected error; it goes on", self.what)
                self._stop.wait(_AFTER_ERROR_S)
            else:
                failing = False
        if self._after_stop is not None:
            self._after_stop()


@dataclass(frozen=True)
class Retry:
    """Back-off and dead-letter policy for a failed attempt (see the module doc)."""

    backoff_s: float
    backoff_max_s: float
    max_age_s: float
    retries: int | None = None

    def delay(self, attempts: int) -> float:
        """Seconds to wait after the ``attempts``-th failed attempt."""
        return Backoff(self.backoff_s, self.backoff_max_s).delay(attempts)

    def gives_up(self, message: OutboxMessage, now: float) -> bool:
        """True when ``message``, failed once more, goes to the dead letters instead of waiting."""
        attempts = message.attempts + 1
        return now - message.created >= self.max_age_s or (self.retries is not None and attempts > self.retries)

    def hold(self, outbox: OutboxStore, message: OutboxMessage, error: str, now: float) -> None:
        """Keep ``message`` in ``outbox`` for its next attempt after the back-off."""
        outbox.retry(message.seq, now + self.delay(message.attempts + 1), error)


class DeadLetters:
    """The dead-letter JSONL file of a sink: appended fsync'd (`AppendLog`: whole lines, under the file's
    ``flock``), rewritten only by `take` under the same lock, so sinks sharing the file lose no line; on a
    full disk the lines wait in memory (at most 10,000, then the oldest are dropped and counted) and go out first next time.

    Attributes:
        written: lines written; failures: writes that failed; dropped: lines dropped.
    """

    def __init__(self, path: str | Path, *, target: str, what: str = "dead letter") -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.target = target
        self.what = what
        self.written = 0
        self.failures = 0
        self.dropped = 0
        self.disk = disk_health()
        self._pending: deque[bytes] = deque()
        self._max_pending = 10_000
        self._log: AppendLog | None = None
        self.lock = threading.Lock()

    def add(self, payload: dict[str, Any], error: str) -> None:
        record = {"event": payload, "url": self.target, "error": error, "failed_at": datetime.now(UTC).isoformat()}
        line = (json.dumps(record, default=str) + "\n").encode("utf-8")
        with self.lock:
            if len(self._pending) >= self._max_pending:
                self._pending.popleft()
                self.dropped += 1
            self._pending.append(line)
            try:
                if self._log is None:  # opened (and the file made) on the first dead letter
                    self._log = AppendLog(self.path)
                self._log.append(b"".join(self._pending))
            except OSError as exc:
                self.failures += 1
                self.disk.failed(self.what, self.path, exc)
                return
            self.written += len(self._pending)
            self._pending.clear()

    def close(self) -> None:
        """Close the file (idempotent; a later `add` opens it again)."""
        with self.lock:
            if self._log is not None:
                self._log.close()
                self._log = None

    def take(self) -> list[dict[str, Any]]:
        """Every dead letter of this target (its ``url``), as event payloads; the file keeps the
        other targets' lines and those that are not ours to judge (unreadable ones, for a human).
        [] when the file cannot be rewritten."""
        with self.lock, locked_for_rewrite(self.path) as fd:  # another sink's appends to this file wait
            if fd is None or os.fstat(fd).st_size == 0:
                return []
            taken: list[dict[str, Any]] = []
            keep: list[str] = []
            with os.fdopen(os.dup(fd), encoding="utf-8") as f:
                text = f.read()
            for line in text.splitlines():
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    payload = record["event"]
                    if not isinstance(payload, dict) or record.get("url", self.target) != self.target:
                        raise TypeError
                except (ValueError, KeyError, TypeError):
                    keep.append(line)
                    continue
                taken.append(payload)
            try:
                replace_durably(self.path, "".join(f"{line}\n" for line in keep).encode("utf-8"))
            except OSError as exc:
                self.disk.failed(self.what, self.path, exc)
                return []
            return taken
