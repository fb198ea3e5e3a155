"""`SiteRetainedState`: an MQTT sink's retained state counts for the whole site, published by one node.

With a PostgreSQL store, several nodes share one site and each node's MQTT sink sees only the
updates its own relay hands on, so no node can count the site's open incidents from what it saw.
The counts are read from the database instead, and exactly one node publishes them:

- *Who.* The node holding a session-level advisory lock of the sink (`SiteLeader`, the lock key
  derived from the site's schema and the sink's name, so two MQTT sinks of one site have a leader
  each). When that node
  dies or loses the server, its session ends, the lock is freed, and the next node to try it
  (every ``retry_s``) leads. No lease and no clock: PostgreSQL's own primitive.
- *What.* Per camera and rule: the open incidents (``events.status = 'open'``, every node's), plus,
  for a rule without an end phase (a line crossing), its updates of the last ``pulse_s`` seconds
  (the same pulse as a single box's); a topic updated in the last minute counts too (as 0 when
  nothing is open), so an incident that opened and ended between two reads still sets its topic.
  Read at most every ``every_s`` seconds by the leader.
- *Which topics.* What the leader last published is kept in ``alert_mqtt_state`` (per sink, camera
  and rule), so a new leader knows every topic a dead one left retained: it publishes all of them
  once (a count that went to 0 while nobody led is set to 0), then only the changes.

The messages are not put into the outbox: a count is a fact read again at any moment, so it is
published directly (QoS of the sink, retained), and published again in full after a reconnect or a
change of leader. An old leader that has not yet noticed it lost its session may publish one stale
count before it stops; the new leader publishes every count when it starts to lead, and its counts
are read after the old one's session ended.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg

from campusguard.app.alerts.postgres.schema import MQTT_STATE_TABLE, migrate_alerts
from campusguard.app.events.pgsession import PgSession, RetryPolicy
from campusguard.app.nodes.leader import SiteLeader

__all__ = ["MQTT_STATE_JOB", "SiteRetainedState"]

log = logging.getLogger(__name__)

StateKey = tuple[str, str]
"""``(camera_id, rule_name)``: one state topic."""

_OPEN_SQL = "SELECT camera_id, rule_name, COUNT(*) FROM events WHERE status = 'open' GROUP BY camera_id, rule_name"
# the topics updated lately (known with 0 even when an incident opened and ended between two reads)
# and, for a rule without an end phase, whose updates are closed incidents that never get an `end`,
# its updates of the pulse; the time_utc bound lets its index limit the scan
_RECENT_SQL = (
    "SELECT camera_id, rule_name, COUNT(*) FILTER (WHERE status = 'closed' AND phase <> 'end' "
    "AND updated_at >= now() - make_interval(secs => %s)) FROM events "
    "WHERE time_utc >= now() - make_interval(secs => %s) AND updated_at >= now() - make_interval(secs => %s) "
    "GROUP BY camera_id, rule_name"
)
_RECENT_S = 60.0
_TIME_SLACK_S = 3600.0  # an incident's time_utc is its start (wall clock), its updated_at when stored


MQTT_STATE_JOB = "mqtt state"
"""The job of the node that publishes a sink's retained state (`SiteLeader`, one per sink)."""


class SiteRetainedState:
    """The site-wide state counts of one MQTT sink (see the module doc; thread-safe).

    Args:
        url: the site's PostgreSQL URL.
        sink: the sink's name (every node names it alike).
        pulse_s: how long an update of a rule without an end phase counts.
        every_s: the least time between two reads of the counts while leading.
        retry_s: how often a follower tries the lock (and the leader checks its session).
        retry: the back-off of calls whose connection failed.

    Raises:
        InvalidInputError, StoreUnavailableError: the tables cannot be opened.
    """

    def __init__(
        self,
        url: str,
        sink: str,
        *,
        pulse_s: float = 5.0,
        every_s: float = 0.5,
        retry_s: float = 2.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.sink = sink
        self.pulse_s = float(pulse_s)
        self.every_s = float(every_s)
        self._session = PgSession(url, what="mqtt site state", retry=retry)
        self.path = f"{self._session.display} {MQTT_STATE_TABLE}[{sink}]"
        self._session.open(migrate_alerts)
        self._lock = threading.Lock()
        self._published: dict[StateKey, int] | None = None  # None: publish every count next
        self._read_at = 0.0
        self.leader = SiteLeader(url, MQTT_STATE_JOB, self._lead, self._lose, names=(sink,), retry_s=retry_s)

    def start(self) -> None:
        """Start trying the lock."""
        self.leader.start()

    @property
    def leading(self) -> bool:
        return self.leader.leading

    def _lead(self) -> None:
        log.info("mqtt sink %s: this node publishes the site's retained state", self.sink)
        self.republish()

    def _lose(self) -> None:
        self.republish()

    def republish(self) -> None:
        """Publish every count at the next `changes` (a reconnect, a new leader)."""
        with self._lock:
            self._published = None
            self._read_at = 0.0

    def changes(self) -> list[tuple[str, str, int]]:
        """The counts to publish now, ``(camera_id, rule_name, count)``: none unless this node leads
        and ``every_s`` passed since the last read; every known topic after `republish`, else only
        those that changed since `record`.

        Raises:
            StoreUnavailableError: the server could not be reached.
        """
        now = time.monotonic()
        with self._lock:
            if not self.leading or now - self._read_at < self.every_s:
                return []
            self._read_at = now
            published = None if self._published is None else dict(self._published)
        counts, known = self._session.run("reading the site's state counts", self._read)
        if published is None:
            published = {}
            keys = set(known) | set(counts)
        else:
            keys = set(published) | set(counts)
        return sorted((c, r, counts.get((c, r), 0)) for c, r in keys if published.get((c, r)) != counts.get((c, r), 0))

    def _read(self, conn: psycopg.Connection[Any]) -> tuple[dict[StateKey, int], dict[StateKey, int]]:
        counts: dict[StateKey, int] = {}
        try:
            opened = conn.execute(_OPEN_SQL).fetchall()
        except psycopg.errors.UndefinedTable:  # no event store opened this database yet: nothing is open
            return counts, {}
        for camera, rule, n in opened:
            counts[(str(camera), str(rule))] = int(n)
        recent = max(_RECENT_S, self.pulse_s)
        args = (self.pulse_s, recent + _TIME_SLACK_S, recent)
        for camera, rule, n in conn.execute(_RECENT_SQL, args).fetchall():
            key = (str(camera), str(rule))
            counts[key] = counts.get(key, 0) + int(n)
        rows = conn.execute(
            f"SELECT camera_id, rule_name, count FROM {MQTT_STATE_TABLE} WHERE sink = %s", (self.sink,)
        ).fetchall()
        return counts, {(str(c), str(r)): int(n) for c, r, n in rows}

    def record(self, published: list[tuple[str, str, int]]) -> None:
        """Remember counts handed to the broker: this node's next `changes` and the next leader start from them."""
        if not published:
            return
        sql = (
            f"INSERT INTO {MQTT_STATE_TABLE} (sink, camera_id, rule_name, count, at) VALUES (%s, %s, %s, %s, %s) "
            "ON CONFLICT (sink, camera_id, rule_name) DO UPDATE SET count = EXCLUDED.count, at = EXCLUDED.at"
        )
        now = time.time()
        rows = [(self.sink, camera, rule, count, now) for camera, rule, count in published]

        def op(conn: psycopg.Connection[Any]) -> None:
            with conn.cursor() as cur:
                cur.executemany(sql, rows)

        self._session.run("recording the published state counts", op)
        with self._lock:
            if self._published is None:
                self._published = {}
            self._published.update({(c, r): n for c, r, n in published})

    def close(self) -> None:
        """Stop leading (the lock is freed) and close the connection (idempotent)."""
        self.leader.stop()
        self._session.close()
