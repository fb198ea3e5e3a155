"""The event store's schema: one list of numbered migrations, rendered for SQLite and for PostgreSQL.

Migration N brings a database from schema N-1 to N, and `SCHEMA_VERSION` is the last one. Both stores
apply the same list, so a version number means the same tables, columns and indexes in both; SQLite
records it in ``PRAGMA user_version`` (`campusguard.app.events.sqlite`), PostgreSQL in its version
table (`campusguard.app.events.postgres`). A schema change is one new entry here, written once.

Each statement is SQL both databases take, with a placeholder where they spell a thing differently
(`SchemaSpelling`; `render` fills them in):

    ``{real}``  stream times          ``{integer}``  frame numbers, counts
    ``{json}``  lists and details     ``{time}``     wall-clock times
    ``{flag}``  yes/no columns, ``{false}`` their "no", ``{flag_check:column}`` the CHECK holding
                an integer flag to 0 or 1 (empty where flags are booleans)
    ``{if_new}``  ``IF NOT EXISTS`` where a create skips what exists
    ``{steps_ref}``  how a checklist row refers to its incident

History: v1 the incidents (``events``, one row per incident, its latest state); v2 the operators'
review (``state``, who acknowledged and resolved, the note); v3 keep (retention never deletes a kept
incident nor its media); v4 the media policy the incident's media were made under (``media_blur``,
NULL before it: the strictest, `campusguard.app.media.policy`); v5 checklists (``event_steps``, one row
per incident and step of its rule's ``sop``); v6 outcomes (what resolving found: ``confirmed``,
``false_alarm``, ``nuisance``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "TABLES", "SchemaSpelling", "SQLITE_SCHEMA", "POSTGRES_SCHEMA", "render"]

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        """CREATE TABLE {if_new}events (
    event_id      TEXT PRIMARY KEY,
    camera_id     TEXT NOT NULL,
    rule_name     TEXT NOT NULL,
    rule_kind     TEXT NOT NULL,
    zone          TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('open', 'closed')),
    phase         TEXT NOT NULL,
    start_s       {real} NOT NULL,
    end_s         {real},
    onset_s       {real},
    start_frame   {integer},
    end_frame     {integer},
    tracker_ids   {json} NOT NULL,
    class_ids     {json} NOT NULL,
    class_names   {json} NOT NULL,
    count         {integer},
    direction     TEXT,
    started_at    {time},
    ended_at      {time},
    snapshot_path TEXT,
    details       {json} NOT NULL,
    time_utc      {time} NOT NULL,
    recorded_at   {time} NOT NULL,
    updated_at    {time} NOT NULL
)""",
        "CREATE INDEX {if_new}events_camera_time ON events (camera_id, time_utc)",
        "CREATE INDEX {if_new}events_rule_time ON events (rule_name, time_utc)",
    ),
    2: (
        """ALTER TABLE events ADD COLUMN state TEXT NOT NULL DEFAULT 'open'
    CHECK (state IN ('open', 'acknowledged', 'resolved'))""",
        "ALTER TABLE events ADD COLUMN acknowledged_by TEXT",
        "ALTER TABLE events ADD COLUMN acknowledged_at {time}",
        "ALTER TABLE events ADD COLUMN resolved_by TEXT",
        "ALTER TABLE events ADD COLUMN resolved_at {time}",
        "ALTER TABLE events ADD COLUMN note TEXT",
        "CREATE INDEX {if_new}events_state_time ON events (state, time_utc)",
        "CREATE INDEX {if_new}events_time ON events (time_utc)",
    ),
    3: (
        "ALTER TABLE events ADD COLUMN kept {flag} NOT NULL DEFAULT {false}{flag_check:kept}",
        "ALTER TABLE events ADD COLUMN kept_by TEXT",
        "ALTER TABLE events ADD COLUMN kept_at {time}",
        "CREATE INDEX {if_new}events_status_ended ON events (status, ended_at)",
    ),
    4: ("ALTER TABLE events ADD COLUMN media_blur TEXT",),
    5: (
        """CREATE TABLE {if_new}event_steps (
    event_id   TEXT NOT NULL{steps_ref},
    step       TEXT NOT NULL,
    checked    {flag} NOT NULL{flag_check:checked},
    changed_by TEXT NOT NULL,
    changed_at {time} NOT NULL,
    PRIMARY KEY (event_id, step)
)""",
    ),
    6: (
        """ALTER TABLE events ADD COLUMN outcome TEXT
    CHECK (outcome IS NULL OR outcome IN ('confirmed', 'false_alarm', 'nuisance'))""",
        "ALTER TABLE events ADD COLUMN outcome_by TEXT",
        "ALTER TABLE events ADD COLUMN outcome_at {time}",
        "CREATE INDEX {if_new}events_outcome_time ON events (outcome, time_utc)",
    ),
}
"""Migration N: the statements that bring a database from schema N-1 to N, with `SchemaSpelling` placeholders."""

SCHEMA_VERSION = max(MIGRATIONS)
"""The schema this CampusGuard writes; a database at a newer one is refused."""

TABLES: frozenset[str] = frozenset(
    re.findall(r"CREATE TABLE \{if_new\}(\w+)", "\n".join(s for steps in MIGRATIONS.values() for s in steps))
)
"""The tables the migrations create (a new database already holding any other table is not the store's)."""


@dataclass(frozen=True)
class _FlagCheck:
    """``{flag_check:column}``: the CHECK keeping an integer flag ``column`` to 0 or 1 (nothing for booleans)."""

    integer_flags: bool

    def __format__(self, column: str) -> str:
        return f" CHECK ({column} IN (0, 1))" if self.integer_flags else ""


@dataclass(frozen=True)
class SchemaSpelling:
    """How one database spells what the migrations leave to it (the placeholders of `MIGRATIONS`).

    Attributes:
        real: the type of stream times (seconds into the stream).
        integer: the type of frame numbers and counts.
        json: the type of the lists and details (`campusguard.app.events.sql.JSON_COLUMNS`).
        time: the type of wall-clock times (`campusguard.app.events.sql.TIME_COLUMNS`).
        flag: the type of yes/no columns; ``false`` is its "no" as a default.
        integer_flags: flags are integers held to 0 and 1 by a CHECK (SQLite has no boolean type).
        if_new: put after ``CREATE TABLE`` and ``CREATE INDEX``: ``"IF NOT EXISTS "`` where a create
            skips what exists, ``""`` where it fails (PostgreSQL, whose migrations run under a lock).
        steps_ref: put after a checklist row's ``event_id``: its reference to the incident, where the
            database enforces it (retention deletes a deleted incident's rows in both).
    """

    real: str
    integer: str
    json: str
    time: str
    flag: str
    false: str
    integer_flags: bool
    if_new: str
    steps_ref: str

    def render(self, statement: str) -> str:
        """One statement of `MIGRATIONS` in this spelling."""
        return statement.format(
            real=self.real,
            integer=self.integer,
            json=self.json,
            time=self.time,
            flag=self.flag,
            false=self.false,
            flag_check=_FlagCheck(self.integer_flags),
            if_new=self.if_new,
            steps_ref=self.steps_ref,
        )


SQLITE_SCHEMA = SchemaSpelling(
    real="REAL",
    integer="INTEGER",
    json="TEXT",
    time="TEXT",
    flag="INTEGER",
    false="0",
    integer_flags=True,
    if_new="IF NOT EXISTS ",
    steps_ref="",
)
"""SQLite: JSON and ISO 8601 UTC times as text, flags as 0/1 integers."""

POSTGRES_SCHEMA = SchemaSpelling(
    real="DOUBLE PRECISION",
    integer="BIGINT",
    json="JSONB",
    time="TIMESTAMPTZ",
    flag="BOOLEAN",
    false="false",
    integer_flags=False,
    if_new="",
    steps_ref=" REFERENCES events (event_id) ON DELETE CASCADE",
)
"""PostgreSQL: native types (``jsonb``, ``timestamptz``, ``boolean``); checklist rows go with their incident."""


def render(spelling: SchemaSpelling) -> dict[int, str]:
    """`MIGRATIONS` in one database's spelling: version -> its statements as one ``;``-separated script."""
    return {version: ";\n".join(map(spelling.render, steps)) for version, steps in MIGRATIONS.items()}
