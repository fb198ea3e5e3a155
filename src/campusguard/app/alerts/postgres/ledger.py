"""`PgDeliveryLedger`: a sink's delivery ledger (`campusguard.app.alerts.ledger.Ledger`) in PostgreSQL.

The table ``alert_delivered`` (`campusguard.app.alerts.postgres.schema`), keyed by the sink's name
and the update, shared by every node of the database: an update one node delivered is skipped by
all. Same rules as the SQLite `campusguard.app.alerts.ledger.DeliveryLedger` (any ``end`` of an
incident counts as its end; rows older than ``keep_days`` dropped at open).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg

from campusguard.app.alerts.ledger import delivery_match
from campusguard.app.alerts.postgres.schema import DELIVERED_TABLE, migrate_alerts
from campusguard.app.events.pgsession import PgSession, RetryPolicy
from campusguard.app.events.protocols import StoreUnavailableError
from campusguard.app.events.types import Event
from campusguard.errors import InvalidInputError

__all__ = ["PgDeliveryLedger"]

log = logging.getLogger(__name__)


class PgDeliveryLedger:
    """A durable set of ``(sink, event_id, phase, sequence)`` deliveries in PostgreSQL (thread-safe).

    Args:
        url: the event store's PostgreSQL URL.
        sink: the name of the sink this ledger answers for.
        retry: the back-off of calls whose connection failed.
        keep_days: rows older than this are dropped at open (> 0).

    Raises:
        InvalidInputError, StoreUnavailableError: the table cannot be opened.
    """

    def __init__(self, url: str, sink: str, *, retry: RetryPolicy | None = None, keep_days: float = 90.0) -> None:
        self.sink = sink
        self._session = PgSession(url, what="delivery ledger", retry=retry)
        self.path = f"{self._session.display} {DELIVERED_TABLE}"
        self._session.open(migrate_alerts)
        cutoff = time.time() - keep_days * 86400
        self._session.run(
            "pruning the delivery ledger",
            lambda c: c.execute(f"DELETE FROM {DELIVERED_TABLE} WHERE sink = %s AND at < %s", (sink, cutoff)),
        )

    def delivered(self, event: Event) -> bool:
        """True when this update (or, for an ``end``, any end of the incident) was delivered.

        Raises:
            StoreUnavailableError: the server could not be reached within the retry budget.
        """
        match, args = delivery_match(event, "%s")
        sql = f"SELECT 1 FROM {DELIVERED_TABLE} WHERE sink = %s AND {match} LIMIT 1"

        def op(conn: psycopg.Connection[Any]) -> bool:
            return conn.execute(sql, (self.sink, *args)).fetchone() is not None

        return bool(self._session.run("reading the delivery ledger", op))

    def record(self, event: Event) -> None:
        """Remember that this update was delivered; committed when this returns."""
        self.record_key(event.event_id, event.phase, int(event.sequence))

    def record_key(self, event_id: str, phase: str, sequence: int) -> None:
        """`record` from the parts of a payload. A record that cannot be written is logged: the
        delivery stands, the outbox's own ledger still keeps the update from being put in again."""
        sql = (
            f"INSERT INTO {DELIVERED_TABLE} (sink, event_id, phase, sequence, at) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT DO NOTHING"
        )
        args = (self.sink, event_id, phase, int(sequence), time.time())
        try:
            self._session.run("recording a delivery", lambda c: c.execute(sql, args))
        except (StoreUnavailableError, InvalidInputError) as exc:
            log.error("delivery ledger %s: %s %s#%d not recorded (%s)", self.path, event_id, phase, sequence, exc)

    def __len__(self) -> int:
        sql = f"SELECT COUNT(*) FROM {DELIVERED_TABLE} WHERE sink = %s"
        row = self._session.run("counting the delivery ledger", lambda c: c.execute(sql, (self.sink,)).fetchone())
        return int(row[0]) if row else 0

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._session.close()
