"""`WebhookSink`: HTTP POST of events from a background thread, with retries, exponential
back-off and a dead-letter file, so a slow or dead receiver never blocks detection and never
loses an alert.

Every alert ends in exactly one of two places: delivered (a 2xx answer) or appended to the
dead-letter JSONL file (``{"event": {...}, "url", "error", "failed_at"}`` per line, fsync'd).
It goes to the dead-letter file when every retry failed, when the bounded queue is full at
``send`` time, or when ``close`` runs out of time. After any successful delivery the sink
re-drives up to ``redrive_batch`` dead letters (one attempt each; the ones that fail again
stay in the file), so a receiver that comes back gets the backlog without operator action.

The body is `Event.to_dict`, so it carries ``event_id``, ``phase`` and ``sequence``: a receiver
drops an update it has seen. With a ``ledger`` (`DeliveryLedger`) every 2xx is remembered on
disk and an update already delivered is not sent again (a restart, a re-read file).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from campusguard.app.alerts.ledger import DeliveryLedger
from campusguard.app.config.alerts import WEBHOOK_BACKOFF_S, WEBHOOK_RETRIES, WEBHOOK_TIMEOUT_S
from campusguard.app.events.types import EVENT_PHASES, Event, PhaseFilter
from campusguard.app.infra.backoff import Backoff
from campusguard.app.infra.diskspace import disk_health
from campusguard.app.infra.durable import append_lines, replace_durably
from campusguard.errors import InvalidInputError

__all__ = ["WebhookSink"]

log = logging.getLogger(__name__)

_STOP = object()


class WebhookSink:
    """POST each event's JSON (`Event.to_dict`) to ``url`` from a background thread.

    Args:
        url: ``http://`` or ``https://`` receiver.
        dead_letter_path: JSONL file for alerts that could not be delivered.
        retries: extra attempts after the first (>= 0).
        backoff_s: wait before the first retry; doubles each retry (seconds, >= 0).
        backoff_max_s: cap on one wait (seconds).
        timeout_s: HTTP connect/read timeout per attempt (seconds, > 0).
        queue_size: bounded queue length (>= 1); a full queue sends the alert to the dead letters.
        headers: extra HTTP headers (e.g. an authorisation token).
        redrive: re-drive dead letters after a successful delivery.
        redrive_batch: most dead letters re-driven per successful delivery.
        phases: lifecycle phases sent.
        ledger: where deliveries are remembered; updates in it are skipped. None: send all.

    Attributes:
        delivered: alerts delivered (re-driven ones included).
        dead_lettered: alerts written to the dead-letter file.
        redriven: dead letters delivered later.
        dead_letter_failures: dead-letter writes that failed (a full disk); their lines wait in
            memory (at most 10,000, then the oldest are dropped: ``dead_letters_dropped``) and
            are written before the next dead letter.
    """

    def __init__(
        self,
        url: str,
        *,
        dead_letter_path: str | Path,
        retries: int = WEBHOOK_RETRIES,
        backoff_s: float = WEBHOOK_BACKOFF_S,
        backoff_max_s: float = 30.0,
        timeout_s: float = WEBHOOK_TIMEOUT_S,
        queue_size: int = 1000,
        headers: Mapping[str, str] | None = None,
        redrive: bool = True,
        redrive_batch: int = 100,
        phases: Collection[str] = EVENT_PHASES,
        ledger: DeliveryLedger | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise InvalidInputError(f"webhook url {url!r} must start with http:// or https://")
        if retries < 0 or backoff_s < 0 or backoff_max_s < 0 or timeout_s <= 0 or queue_size < 1:
            raise InvalidInputError(f"webhook {url}: need retries >= 0, backoff_s >= 0, timeout_s > 0, queue_size >= 1")
        self.url = url
        self.dead_letter_path = Path(dead_letter_path)
        self.dead_letter_path.parent.mkdir(parents=True, exist_ok=True)
        self.retries = int(retries)
        self.backoff_s = float(backoff_s)
        self.backoff_max_s = float(backoff_max_s)
        self._backoff = Backoff(self.backoff_s, self.backoff_max_s, factor=2.0)
        self.timeout_s = float(timeout_s)
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        self.redrive = redrive
        self.redrive_batch = int(redrive_batch)
        self.phases = PhaseFilter(phases)
        self.ledger = ledger
        self.delivered = 0
        self.dead_lettered = 0
        self.redriven = 0
        self.dead_letter_failures = 0
        self.dead_letters_dropped = 0
        self.disk = disk_health()
        self._dead_pending: deque[bytes] = deque()  # dead letters waiting for room on the disk
        self._dead_pending_max = 10_000
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=int(queue_size))
        self._dead_lock = threading.Lock()
        self._abort = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"webhook-{url}", daemon=True)
        self._thread.start()

    # caller side ----------------------------------------------------------------------------
    def send(self, event: Event) -> None:
        """Queue one event for delivery; never blocks. A full queue dead-letters it at once."""
        if not self.phases.accepts(event):
            return
        if self.ledger is not None and self.ledger.delivered(event):
            return
        if self._closed:
            self._dead_letter(event.to_dict(), "sink closed")
            return
        try:
            self._queue.put_nowait(event.to_dict())
        except queue.Full:
            self._dead_letter(event.to_dict(), "queue full")

    def close(self, timeout_s: float = 5.0) -> None:
        """Deliver what is queued within ``timeout_s``; dead-letter the rest; stop the thread."""
        if self._closed:
            return
        self._closed = True
        try:
            self._queue.put(_STOP, timeout=max(timeout_s, 0.001))
        except queue.Full:
            self._abort.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._abort.set()  # stop retrying: remaining alerts go to the dead letters
            self._thread.join(self.timeout_s + 1.0)
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                self._dead_letter(item, "not delivered before close")
        if self.ledger is not None:
            self.ledger.close()

    # worker side ----------------------------------------------------------------------------
    def _post(self, payload: dict[str, Any]) -> None:
        """One attempt; raises on anything but a 2xx answer."""
        body = json.dumps(payload, default=str).encode("utf-8")
        request = urllib.request.Request(self.url, data=body, headers=self.headers, method="POST")
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            response.read()
            if not 200 <= response.status < 300:
                raise urllib.error.HTTPError(self.url, response.status, "not 2xx", response.headers, None)

    def _deliver(self, payload: dict[str, Any], attempts: int) -> str | None:
        """Try up to ``attempts`` times with back-off; return ``None`` on success, else the last error."""
        error = "not attempted"
        waits = self._backoff.waits(self._abort)
        for attempt in range(attempts):
            if attempt and next(waits):
                break
            try:
                self._post(payload)
                return None
            except urllib.error.HTTPError as exc:
                error = f"HTTP {exc.code}"
                if 400 <= exc.code < 500 and exc.code not in (408, 429):
                    break  # the receiver rejects this alert; retrying will not help
            except (OSError, ValueError) as exc:
                error = f"{type(exc).__name__}: {exc}"
            if self._abort.is_set():
                break
        return error

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=0.2)
            except queue.Empty:
                if self._abort.is_set():
                    return  # closing and nothing left (close may not have managed to queue _STOP)
                continue
            if item is _STOP:
                return
            if self._abort.is_set():
                self._dead_letter(item, "not delivered before close")
                continue
            error = self._deliver(item, 1 + self.retries)
            if error is None:
                self._ledger(item)
                self.delivered += 1
                if self.redrive and not self._abort.is_set():
                    self._redrive()
            else:
                log.warning("webhook %s failed for event %s: %s", self.url, item.get("event_id"), error)
                self._dead_letter(item, error)

    def _ledger(self, payload: dict[str, Any]) -> None:
        if self.ledger is not None and isinstance(payload, dict) and payload.get("event_id"):
            self.ledger.record_key(
                str(payload["event_id"]), str(payload.get("phase")), int(payload.get("sequence") or 0)
            )

    def _dead_letter(self, payload: dict[str, Any], error: str) -> None:
        """Append the alert to the dead letters (fsync'd). On a full disk the line waits in memory
        (bounded) and goes out before the next one; it is never cut, and the sink goes on."""
        record = {"event": payload, "url": self.url, "error": error, "failed_at": datetime.now(UTC).isoformat()}
        line = (json.dumps(record, default=str) + "\n").encode("utf-8")
        with self._dead_lock:
            if len(self._dead_pending) >= self._dead_pending_max:
                self._dead_pending.popleft()
                self.dead_letters_dropped += 1
            self._dead_pending.append(line)
            self._write_dead_letters()

    def _write_dead_letters(self) -> None:
        """Append the waiting dead letters in one all-or-nothing write (hold ``_dead_lock``)."""
        if not self._dead_pending:
            return
        try:
            fd = os.open(self.dead_letter_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                append_lines(fd, b"".join(self._dead_pending))
            finally:
                os.close(fd)
        except OSError as exc:
            self.dead_letter_failures += 1
            self.disk.failed("webhook dead letter", self.dead_letter_path, exc)
            return
        self.dead_lettered += len(self._dead_pending)
        self._dead_pending.clear()

    def _redrive(self) -> None:
        """Re-send up to ``redrive_batch`` dead letters once each, stopping at the first failure;
        what is not delivered stays in the file."""
        with self._dead_lock:
            if not self.dead_letter_path.is_file() or self.dead_letter_path.stat().st_size == 0:
                return
            lines = self.dead_letter_path.read_text(encoding="utf-8").splitlines()
            keep: list[str] = []
            failed = False
            for i, line in enumerate(lines):
                if not line.strip():
                    continue
                if failed or i >= self.redrive_batch or self._abort.is_set():
                    keep.append(line)
                    continue
                try:
                    payload = json.loads(line)["event"]
                except (ValueError, KeyError, TypeError):
                    keep.append(line)  # not ours to judge: leave it for a human
                    continue
                if self._deliver(payload, 1) is None:
                    self._ledger(payload)
                    self.delivered += 1
                    self.redriven += 1
                else:
                    keep.append(line)
                    failed = True  # the receiver is down again: stop, do not pay a timeout per line
            try:
                replace_durably(self.dead_letter_path, "".join(f"{line}\n" for line in keep).encode("utf-8"))
            except OSError as exc:  # the file keeps every line: the ones just delivered are sent again later
                self.disk.failed("webhook dead letters", self.dead_letter_path, exc)
