"""`PgDeadlines`: the rules' escalation deadlines (`campusguard.app.alerts.escalation.Deadlines`) in PostgreSQL.

The table ``alert_escalations`` (`campusguard.app.alerts.postgres.schema`), shared by every node.
`PgDeadlines.settle` takes one passed deadline at a time in a transaction of its own
(``FOR UPDATE SKIP LOCKED``: none another node is settling), settles it (the escalation is put into
the target sinks' outboxes) and marks it done in that transaction. A node killed while it settles
one releases it: a survivor fires it; an escalation put in twice that way is put into each durable
outbox once (``(sink, event_id, "escalation", sequence)``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg

from campusguard.app.alerts.postgres.schema import ESCALATIONS_TABLE, migrate_alerts
from campusguard.app.events.pgsession import PgSession, RetryPolicy

if TYPE_CHECKING:
    from campusguard.app.alerts.escalation import Settle

__all__ = ["PgDeadlines"]

_KEEP_DONE_S = 90 * 86400.0
_CLAIM_SQL = (
    f"SELECT event_id, targets, event FROM {ESCALATIONS_TABLE} WHERE NOT done AND due <= %s "
    "ORDER BY due LIMIT 1 FOR UPDATE SKIP LOCKED"
)


class PgDeadlines:
    """Escalation deadlines shared by the nodes of one PostgreSQL database (thread-safe).

    Args:
        url: the event store's PostgreSQL URL.
        retry: the back-off of calls whose connection failed.

    Raises:
        InvalidInputError, StoreUnavailableError: the table cannot be opened.
    """

    def __init__(self, url: str, *, retry: RetryPolicy | None = None) -> None:
        self._session = PgSession(url, what="escalation deadlines", retry=retry)
        self.path = f"{self._session.display} {ESCALATIONS_TABLE}"
        self._session.open(migrate_alerts)
        cutoff = time.time() - _KEEP_DONE_S
        self._session.run(
            "pruning escalation deadlines",
            lambda c: c.execute(f"DELETE FROM {ESCALATIONS_TABLE} WHERE done AND due < %s", (cutoff,)),
        )

    def add(self, event_id: str, due: float, targets: Sequence[str], event_json: str) -> None:
        """Set an incident's deadline unless it has one (any node's)."""
        sql = (
            f"INSERT INTO {ESCALATIONS_TABLE} (event_id, due, targets, event) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (event_id) DO NOTHING"
        )
        args = (event_id, due, json.dumps(list(targets)), event_json)
        self._session.run(f"setting the escalation deadline of {event_id}", lambda c: c.execute(sql, args))

    def pending(self) -> int:
        sql = f"SELECT COUNT(*) FROM {ESCALATIONS_TABLE} WHERE NOT done"
        row = self._session.run("counting escalation deadlines", lambda c: c.execute(sql).fetchone())
        return int(row[0]) if row else 0

    def settle(self, now: float, settle: Settle) -> None:
        """Settle the deadlines passed by ``now``, one claimed per transaction, until none is left that
        no other node holds, or ``settle`` says not now."""
        while self._session.run("settling escalation deadlines", lambda c: self._settle_one(c, now, settle)):
            pass

    @staticmethod
    def _settle_one(conn: psycopg.Connection[Any], now: float, settle: Settle) -> bool:
        with conn.transaction():
            row = conn.execute(_CLAIM_SQL, (now,)).fetchone()
            if row is None:
                return False
            event_id, targets, payload = row
            outcome = settle(str(event_id), list(json.loads(targets)), str(payload))
            if outcome is None:
                return False
            conn.execute(
                f"UPDATE {ESCALATIONS_TABLE} SET done = true, outcome = %s WHERE event_id = %s", (outcome, event_id)
            )
        return True

    def close(self) -> None:
        """Close the connection (idempotent)."""
        self._session.close()
