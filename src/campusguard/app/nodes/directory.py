"""`NodeDirectory`: the site's nodes and camera leases in PostgreSQL, the only thing nodes share to agree.

Two tables, created once under an advisory lock (``CREATE TABLE IF NOT EXISTS``):

- ``site_nodes``: one row per node name: its console URL, when this run of it started, when it was
  last seen (a heartbeat every second) and since when it has been seen without a gap
  (``joined_at``, reset when it comes back). A node that stopped cleanly says so (``stopped``).
- ``camera_zone_edits``: each camera's zones, lines, rules and privacy as last saved in a console,
  announced on ``LISTEN/NOTIFY`` channel ``campusguard_zones`` (`ZoneEditListener`): every node
  writes it into its own config file and the node that runs the camera applies it.
- ``camera_leases``: one row per camera: the node that runs it and until when (``expires_at``, on
  the server's clock), renewed every second with the camera's status as its node sees it. A lease
  is taken only when it is free, expired, or already ours, in one ``INSERT ... ON CONFLICT ... WHERE``:
  two nodes can never both hold one. ``moves`` counts how often the camera changed node.

Times are the server's (``now()``), so the nodes' clocks never need to agree.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from campusguard.app.events.urls import one_line
from campusguard.app.infra.secrets import redact_url

__all__ = ["ZONES_CHANNEL", "CameraLease", "NodeDirectory", "NodeInfo", "DirectoryUnavailableError"]

log = logging.getLogger(__name__)

_LOCK = 0x43474E4F  # "CGNO": the advisory lock the first opener holds while it creates the tables
_SCHEMA = """
CREATE TABLE IF NOT EXISTS site_nodes (
    name       TEXT PRIMARY KEY,
    url        TEXT,
    host       TEXT,
    pid        INTEGER,
    started_at TIMESTAMPTZ NOT NULL,
    joined_at  TIMESTAMPTZ NOT NULL,
    seen_at    TIMESTAMPTZ NOT NULL,
    stopped    BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE TABLE IF NOT EXISTS camera_leases (
    camera      TEXT PRIMARY KEY,
    node        TEXT,
    previous    TEXT,
    expires_at  TIMESTAMPTZ NOT NULL,
    acquired_at TIMESTAMPTZ,
    moves       INTEGER NOT NULL DEFAULT 0,
    status      JSONB
);
CREATE TABLE IF NOT EXISTS camera_zone_edits (
    camera TEXT PRIMARY KEY,
    parts  JSONB NOT NULL,
    node   TEXT NOT NULL,
    at     TIMESTAMPTZ NOT NULL
)
"""
ZONES_CHANNEL = "campusguard_zones"


class DirectoryUnavailableError(Exception):
    """PostgreSQL did not answer a directory call (the node fences itself when this lasts)."""


@dataclass(frozen=True)
class NodeInfo:
    """One node as the directory knows it.

    Attributes:
        name: the node's name (``serve --node``).
        url: its console's base URL (for the live view of its cameras through another node).
        host: the machine it runs on; pid: its process id there.
        started_at: when this run of it started; joined_at: since when it has been seen without a gap;
        seen_at: its last heartbeat (server time).
        age_s: seconds since its last heartbeat; stopped: it stopped cleanly.
    """

    name: str
    url: str | None
    host: str | None
    pid: int | None
    started_at: datetime
    joined_at: datetime
    seen_at: datetime
    age_s: float
    joined_s: float
    stopped: bool


@dataclass(frozen=True)
class CameraLease:
    """Who runs a camera: ``node`` (None: nobody), whether the lease is still ``valid``, its status."""

    camera: str
    node: str | None
    valid: bool
    moves: int
    status: dict[str, Any] | None


class NodeDirectory:
    """The nodes and leases tables over one autocommit connection (thread-safe: one lock).

    Args:
        url: the site's PostgreSQL URL (``storage.postgresql``).
        node: this node's name.
        connect_timeout_s: longest wait for a connection (libpq counts whole seconds, at least 2).
        statement_timeout_s: longest a directory statement may run before the server cancels it.
    """

    def __init__(self, url: str, node: str, *, connect_timeout_s: float = 2.0, statement_timeout_s: float = 3.0) -> None:
        import psycopg  # the postgres extra

        self._psycopg = psycopg
        self.url = url
        self.display = redact_url(url)
        self.node = node
        self.connect_timeout_s = connect_timeout_s
        self.statement_timeout_s = statement_timeout_s
        self._lock = threading.Lock()
        self._conn: Any = None
        self._closed = False

    # connection ---------------------------------------------------------------------------------
    def _connect(self) -> Any:
        conn = self._psycopg.connect(
            self.url,
            autocommit=True,
            connect_timeout=max(2, round(self.connect_timeout_s)),
            application_name=f"campusguard-node-{self.node}"[:63],
            keepalives=1,
            keepalives_idle=2,
            keepalives_interval=1,
            keepalives_count=2,
        )
        conn.execute(f"SET statement_timeout = {round(self.statement_timeout_s * 1000)}")
        return conn

    def _call(self, what: str, sql: str, args: Any = None, *, rows: bool = True) -> list[tuple[Any, ...]]:
        with self._lock:
            if self._closed:
                raise DirectoryUnavailableError("the node directory is closed")
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = self._connect()
                cur = self._conn.execute(sql, args)
                return list(cur.fetchall()) if rows and cur.description is not None else []
            except self._psycopg.Error as exc:
                if self._conn is not None:
                    with contextlib.suppress(Exception):
                        self._conn.close()
                self._conn = None
                raise DirectoryUnavailableError(f"{what} on {self.display}: {one_line(exc)}") from None

    def create_tables(self) -> None:
        """Create the two tables when missing (the first of several nodes starting at once does it)."""
        with self._lock:
            try:
                conn = self._conn if self._conn is not None and not self._conn.closed else self._connect()
                self._conn = conn
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            conn.execute(statement)
            except self._psycopg.Error as exc:
                self._conn = None
                raise DirectoryUnavailableError(f"creating the node tables on {self.display}: {one_line(exc)}") from None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None

    # nodes -------------------------------------------------------------------------------------
    def heartbeat(self, url: str | None, host: str, pid: int, *, first: bool, gap_s: float) -> None:
        """Say this node is alive. ``first``: this run's first heartbeat (a restart joins anew);
        a node unseen for over ``gap_s`` seconds also joins anew."""
        self._call(
            "heartbeat",
            """
            INSERT INTO site_nodes (name, url, host, pid, started_at, joined_at, seen_at, stopped)
            VALUES (%(name)s, %(url)s, %(host)s, %(pid)s, now(), now(), now(), FALSE)
            ON CONFLICT (name) DO UPDATE SET
                url = EXCLUDED.url, host = EXCLUDED.host, pid = EXCLUDED.pid, stopped = FALSE,
                started_at = CASE WHEN %(first)s THEN now() ELSE site_nodes.started_at END,
                joined_at = CASE
                    WHEN %(first)s OR site_nodes.stopped OR site_nodes.seen_at < now() - make_interval(secs => %(gap)s)
                    THEN now() ELSE site_nodes.joined_at END,
                seen_at = now()
            """,
            {"name": self.node, "url": url, "host": host, "pid": pid, "first": first, "gap": gap_s},
            rows=False,
        )

    def say_goodbye(self) -> None:
        """This node stops cleanly: it is no longer live, and its leases are free (others take over at once)."""
        self._call(
            "goodbye",
            "UPDATE camera_leases SET node = NULL, previous = node, expires_at = now() WHERE node = %s",
            (self.node,),
            rows=False,
        )
        self._call("goodbye", "UPDATE site_nodes SET stopped = TRUE WHERE name = %s", (self.node,), rows=False)

    def nodes(self) -> list[NodeInfo]:
        """Every node ever seen, with its heartbeat's age (server clock)."""
        found = self._call(
            "nodes",
            """
            SELECT name, url, host, pid, started_at, joined_at, seen_at,
                   EXTRACT(EPOCH FROM now() - seen_at)::float8, EXTRACT(EPOCH FROM now() - joined_at)::float8, stopped
            FROM site_nodes ORDER BY name
            """,
        )
        return [NodeInfo(*row) for row in found]

    # leases ------------------------------------------------------------------------------------
    def acquire(self, camera: str, lease_s: float) -> tuple[bool, str | None]:
        """Take ``camera``'s lease if it is free, expired or ours: (taken, the node that held it before)."""
        found = self._call(
            "acquire",
            """
            INSERT INTO camera_leases AS l (camera, node, previous, expires_at, acquired_at, moves)
            VALUES (%(camera)s, %(node)s, NULL, now() + make_interval(secs => %(lease)s), now(), 0)
            ON CONFLICT (camera) DO UPDATE SET
                node = EXCLUDED.node,
                previous = CASE WHEN l.node = EXCLUDED.node THEN l.previous ELSE COALESCE(l.node, l.previous) END,
                expires_at = EXCLUDED.expires_at,
                acquired_at = CASE WHEN l.node IS NOT DISTINCT FROM EXCLUDED.node THEN l.acquired_at ELSE now() END,
                moves = l.moves + CASE
                    WHEN COALESCE(l.node, l.previous) IS NULL OR COALESCE(l.node, l.previous) = EXCLUDED.node
                    THEN 0 ELSE 1 END
            WHERE l.node IS NULL OR l.node = EXCLUDED.node OR l.expires_at < now()
            RETURNING previous
            """,
            {"camera": camera, "node": self.node, "lease": lease_s},
        )
        return (True, found[0][0]) if found else (False, None)

    def renew(self, statuses: Mapping[str, dict[str, Any]], lease_s: float) -> set[str]:
        """Extend this node's leases of the cameras in ``statuses`` (storing each status); the cameras
        whose lease is still ours (any other was lost: expired and taken)."""
        if not statuses:
            return set()
        cameras = list(statuses)
        found = self._call(
            "renew",
            """
            UPDATE camera_leases AS l
            SET expires_at = now() + make_interval(secs => %(lease)s), status = v.status
            FROM (SELECT unnest(%(cameras)s::text[]) AS camera, unnest(%(statuses)s::jsonb[]) AS status) AS v
            WHERE l.camera = v.camera AND l.node = %(node)s
            RETURNING l.camera
            """,
            {
                "lease": lease_s,
                "cameras": cameras,
                "statuses": [json.dumps(statuses[c], default=str) for c in cameras],
                "node": self.node,
            },
        )
        return {row[0] for row in found}

    def release(self, camera: str) -> None:
        """Give up ``camera``'s lease (after its pipeline stopped): the assigned node takes it at once."""
        self._call(
            "release",
            "UPDATE camera_leases SET node = NULL, previous = node, expires_at = now() WHERE camera = %s AND node = %s",
            (camera, self.node),
            rows=False,
        )

    def leases(self, cameras: Iterable[str] | None = None) -> dict[str, CameraLease]:
        """Every camera's lease (or those of ``cameras``)."""
        found = self._call(
            "leases",
            "SELECT camera, node, expires_at > now(), moves, status FROM camera_leases ORDER BY camera",
        )
        wanted = None if cameras is None else set(cameras)
        return {
            row[0]: CameraLease(row[0], row[1], bool(row[2]), int(row[3]), row[4])
            for row in found
            if wanted is None or row[0] in wanted
        }

    # zone edits ----------------------------------------------------------------------------------
    def publish_zones(self, camera: str, parts: dict[str, Any]) -> None:
        """A console of this node saved ``camera``'s editable parts: store them and tell every node."""
        self._call(
            "zone edit",
            """
            INSERT INTO camera_zone_edits (camera, parts, node, at) VALUES (%s, %s::jsonb, %s, now())
            ON CONFLICT (camera) DO UPDATE SET parts = EXCLUDED.parts, node = EXCLUDED.node, at = EXCLUDED.at
            """,
            (camera, json.dumps(parts, default=str), self.node),
            rows=False,
        )
        self._call("zone edit", "SELECT pg_notify(%s, %s)", (ZONES_CHANNEL, camera), rows=False)

    def zone_edits(self) -> dict[str, tuple[dict[str, Any], str]]:
        """Every camera's last saved editable parts and the node whose console saved them."""
        found = self._call("zone edits", "SELECT camera, parts, node FROM camera_zone_edits")
        return {row[0]: (row[1], row[2]) for row in found}
