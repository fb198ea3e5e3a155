"""The tables of the alerts' delivery state in PostgreSQL and their migrations (`migrate_alerts`)."""

from __future__ import annotations

from typing import Any

import psycopg

from campusguard.app.events.pgsession import advisory_key, apply_migrations

__all__ = ["DELIVERED_TABLE", "ESCALATIONS_TABLE", "MQTT_STATE_TABLE", "OUTBOX_TABLE", "PUT_TABLE", "migrate_alerts"]

OUTBOX_TABLE = "alert_outbox"
PUT_TABLE = "alert_outbox_put"
DELIVERED_TABLE = "alert_delivered"
ESCALATIONS_TABLE = "alert_escalations"
MQTT_STATE_TABLE = "alert_mqtt_state"
VERSION_TABLE = "campusguard_alerts_schema"
_LOCK = advisory_key("cgalerts")

MIGRATIONS: dict[int, str] = {
    1: f"""
CREATE TABLE {OUTBOX_TABLE} (
    seq      BIGSERIAL PRIMARY KEY,
    sink     TEXT NOT NULL,
    topic    TEXT NOT NULL,
    payload  BYTEA NOT NULL,
    retain   BOOLEAN NOT NULL DEFAULT false,
    created  DOUBLE PRECISION NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    due      DOUBLE PRECISION NOT NULL DEFAULT 0,
    error    TEXT
);
CREATE INDEX {OUTBOX_TABLE}_topic ON {OUTBOX_TABLE} (sink, topic, seq);
CREATE INDEX {OUTBOX_TABLE}_due ON {OUTBOX_TABLE} (sink, due);
CREATE TABLE {PUT_TABLE} (
    sink     TEXT NOT NULL,
    event_id TEXT NOT NULL,
    phase    TEXT NOT NULL,
    sequence BIGINT NOT NULL,
    at       DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (sink, event_id, phase, sequence)
);
CREATE TABLE {DELIVERED_TABLE} (
    sink     TEXT NOT NULL,
    event_id TEXT NOT NULL,
    phase    TEXT NOT NULL,
    sequence BIGINT NOT NULL,
    at       DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (sink, event_id, phase, sequence)
);
CREATE TABLE {ESCALATIONS_TABLE} (
    event_id TEXT PRIMARY KEY,
    due      DOUBLE PRECISION NOT NULL,
    targets  TEXT NOT NULL,
    event    TEXT NOT NULL,
    done     BOOLEAN NOT NULL DEFAULT false,
    outcome  TEXT
);
CREATE INDEX {ESCALATIONS_TABLE}_due ON {ESCALATIONS_TABLE} (done, due)
""",
    2: f"""
CREATE TABLE {MQTT_STATE_TABLE} (
    sink      TEXT NOT NULL,
    camera_id TEXT NOT NULL,
    rule_name TEXT NOT NULL,
    count     BIGINT NOT NULL,
    at        DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (sink, camera_id, rule_name)
)
""",
}
"""Migration N brings the alert tables from version N-1 to N."""


def migrate_alerts(conn: psycopg.Connection[Any]) -> None:
    """Create or bring up to date the alert tables (one transaction, under their advisory lock)."""
    apply_migrations(conn, version_table=VERSION_TABLE, lock=_LOCK, migrations=MIGRATIONS, what="alert tables")
