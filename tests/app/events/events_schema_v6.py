"""The event store's schema as the code wrote it before one migration list rendered both dialects:
a frozen copy of ``_SCHEMA_V1`` .. ``_SCHEMA_V6`` of ``app/events/store.py`` (SQLite) and
``app/events/postgres.py`` (PostgreSQL) at schema version 6. Test data: never edit it to follow the
code; `test_events_migrations.py` checks that the rendered migrations build the same catalog.
"""

from __future__ import annotations

SQLITE_V6: dict[int, str] = {
    1: """
CREATE TABLE IF NOT EXISTS events (
    event_id      TEXT PRIMARY KEY,
    camera_id     TEXT NOT NULL,
    rule_name     TEXT NOT NULL,
    rule_kind     TEXT NOT NULL,
    zone          TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('open', 'closed')),
    phase         TEXT NOT NULL,
    start_s       REAL NOT NULL,
    end_s         REAL,
    onset_s       REAL,
    start_frame   INTEGER,
    end_frame     INTEGER,
    tracker_ids   TEXT NOT NULL,
    class_ids     TEXT NOT NULL,
    class_names   TEXT NOT NULL,
    count         INTEGER,
    direction     TEXT,
    started_at    TEXT,
    ended_at      TEXT,
    snapshot_path TEXT,
    details       TEXT NOT NULL,
    time_utc      TEXT NOT NULL,
    recorded_at   TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_camera_time ON events (camera_id, time_utc);
CREATE INDEX IF NOT EXISTS events_rule_time ON events (rule_name, time_utc);
""",
    2: """
ALTER TABLE events ADD COLUMN state TEXT NOT NULL DEFAULT 'open'
    CHECK (state IN ('open', 'acknowledged', 'resolved'));
ALTER TABLE events ADD COLUMN acknowledged_by TEXT;
ALTER TABLE events ADD COLUMN acknowledged_at TEXT;
ALTER TABLE events ADD COLUMN resolved_by TEXT;
ALTER TABLE events ADD COLUMN resolved_at TEXT;
ALTER TABLE events ADD COLUMN note TEXT;
CREATE INDEX IF NOT EXISTS events_state_time ON events (state, time_utc);
CREATE INDEX IF NOT EXISTS events_time ON events (time_utc);
""",
    3: """
ALTER TABLE events ADD COLUMN kept INTEGER NOT NULL DEFAULT 0 CHECK (kept IN (0, 1));
ALTER TABLE events ADD COLUMN kept_by TEXT;
ALTER TABLE events ADD COLUMN kept_at TEXT;
CREATE INDEX IF NOT EXISTS events_status_ended ON events (status, ended_at);
""",
    4: """
ALTER TABLE events ADD COLUMN media_blur TEXT;
""",
    5: """
CREATE TABLE IF NOT EXISTS event_steps (
    event_id   TEXT NOT NULL,
    step       TEXT NOT NULL,
    checked    INTEGER NOT NULL CHECK (checked IN (0, 1)),
    changed_by TEXT NOT NULL,
    changed_at TEXT NOT NULL,
    PRIMARY KEY (event_id, step)
);
""",
    6: """
ALTER TABLE events ADD COLUMN outcome TEXT
    CHECK (outcome IS NULL OR outcome IN ('confirmed', 'false_alarm', 'nuisance'));
ALTER TABLE events ADD COLUMN outcome_by TEXT;
ALTER TABLE events ADD COLUMN outcome_at TEXT;
CREATE INDEX IF NOT EXISTS events_outcome_time ON events (outcome, time_utc);
""",
}
"""Migration N of the SQLite store, brought a database from schema N-1 to N."""

POSTGRES_V6: dict[int, str] = {
    1: """
CREATE TABLE events (
    event_id      TEXT PRIMARY KEY,
    camera_id     TEXT NOT NULL,
    rule_name     TEXT NOT NULL,
    rule_kind     TEXT NOT NULL,
    zone          TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('open', 'closed')),
    phase         TEXT NOT NULL,
    start_s       DOUBLE PRECISION NOT NULL,
    end_s         DOUBLE PRECISION,
    onset_s       DOUBLE PRECISION,
    start_frame   BIGINT,
    end_frame     BIGINT,
    tracker_ids   JSONB NOT NULL,
    class_ids     JSONB NOT NULL,
    class_names   JSONB NOT NULL,
    count         BIGINT,
    direction     TEXT,
    started_at    TIMESTAMPTZ,
    ended_at      TIMESTAMPTZ,
    snapshot_path TEXT,
    details       JSONB NOT NULL,
    time_utc      TIMESTAMPTZ NOT NULL,
    recorded_at   TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);
CREATE INDEX events_camera_time ON events (camera_id, time_utc);
CREATE INDEX events_rule_time ON events (rule_name, time_utc)
""",
    2: """
ALTER TABLE events ADD COLUMN state TEXT NOT NULL DEFAULT 'open'
    CHECK (state IN ('open', 'acknowledged', 'resolved'));
ALTER TABLE events ADD COLUMN acknowledged_by TEXT;
ALTER TABLE events ADD COLUMN acknowledged_at TIMESTAMPTZ;
ALTER TABLE events ADD COLUMN resolved_by TEXT;
ALTER TABLE events ADD COLUMN resolved_at TIMESTAMPTZ;
ALTER TABLE events ADD COLUMN note TEXT;
CREATE INDEX events_state_time ON events (state, time_utc);
CREATE INDEX events_time ON events (time_utc)
""",
    3: """
ALTER TABLE events ADD COLUMN kept BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE events ADD COLUMN kept_by TEXT;
ALTER TABLE events ADD COLUMN kept_at TIMESTAMPTZ;
CREATE INDEX events_status_ended ON events (status, ended_at)
""",
    4: """
ALTER TABLE events ADD COLUMN media_blur TEXT
""",
    5: """
CREATE TABLE event_steps (
    event_id   TEXT NOT NULL REFERENCES events (event_id) ON DELETE CASCADE,
    step       TEXT NOT NULL,
    checked    BOOLEAN NOT NULL,
    changed_by TEXT NOT NULL,
    changed_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (event_id, step)
)
""",
    6: """
ALTER TABLE events ADD COLUMN outcome TEXT
    CHECK (outcome IS NULL OR outcome IN ('confirmed', 'false_alarm', 'nuisance'));
ALTER TABLE events ADD COLUMN outcome_by TEXT;
ALTER TABLE events ADD COLUMN outcome_at TIMESTAMPTZ;
CREATE INDEX events_outcome_time ON events (outcome, time_utc)
""",
}
"""Migration N of the PostgreSQL store, brought a database from schema N-1 to N."""
