"""PostgreSQL's own parts: URLs (checked without I/O, never shown with a password), start-up errors
that name the storage field, a database that is not ours, and `campusguard events` on a URL.

The store contract itself is `test_events_contract.py`; lost connections are
`test_events_postgres_restart.py`.
"""

from __future__ import annotations

import io
import json
import socket
import sys
from pathlib import Path

import pytest

sys.path.insert(1, str(Path(__file__).parents[1]))
from fakes_watch import BlobDetector, scene_config, write_scene  # noqa: E402

from campusguard.app.config import parse_config  # noqa: E402
from campusguard.app.events import StoreUnavailableError, open_event_store  # noqa: E402
from campusguard.app.events.urls import postgres_url_problem, redact_url  # noqa: E402
from campusguard.app.service import WatchService  # noqa: E402
from campusguard.cli.main import main  # noqa: E402
from campusguard.errors import ConfigError, InvalidInputError  # noqa: E402


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://ops@db:5432/events", "postgresql://ops@db:5432/events"),
        ("postgresql://ops:s3cret@db:5432/events", "postgresql://ops:***@db:5432/events"),
        (
            "postgres://ops:s3cret@db/events?password=s3cret&sslmode=require",
            "postgres://ops:***@db/events?password=***&sslmode=require",
        ),
    ],
)
def test_urls_are_shown_without_passwords(url: str, shown: str) -> None:
    assert redact_url(url) == shown and "s3cret" not in redact_url(url)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("postgresql://ops@db:5432/events", None),
        ("postgres://db/events", None),
        ("postgresql:///events?host=/var/run/postgresql", None),
        ("mysql://ops@db/events", "must be a postgresql:// or postgres:// URL"),
        ("db.example:5432/events", "must be a postgresql:// or postgres:// URL"),
        ("postgresql://ops@db:port/events", "is not a valid URL"),
    ],
)
def test_postgres_url_problems_are_found_without_connecting(url: str, problem: str | None) -> None:
    found = postgres_url_problem(url)
    assert found is None if problem is None else (found is not None and problem in found)


def test_the_storage_section_checks_the_url_and_names_the_field() -> None:
    ok = parse_config("storage:\n  postgresql: postgresql://ops@db:5432/events\n", "w.yaml").config.storage
    assert ok.postgresql == "postgresql://ops@db:5432/events" and ok.retry.budget_s == 30
    with pytest.raises(ConfigError, match=r"w.yaml:2: storage.postgresql: .*postgresql:// or postgres://") as info:
        parse_config("storage:\n  postgresql: mysql://ops:s3cret@db/events\n", "w.yaml")
    assert "s3cret" not in str(info.value)
    with pytest.raises(ConfigError, match=r"storage.retry.budget_s"):
        parse_config("storage:\n  retry: {budget_s: -1}\n", "w.yaml")


def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    url = f"postgresql://ops:s3cret@127.0.0.1:{_closed_port()}/events"
    with pytest.raises(StoreUnavailableError, match="cannot be reached") as info:
        open_event_store(url)
    message = str(info.value)
    assert "\n" not in message and "s3cret" not in message and "ops:***@127.0.0.1" in message
    with pytest.raises(InvalidInputError, match="not a valid URL"):
        open_event_store("postgresql://ops@db:port/events")


def test_watch_start_up_names_the_storage_field_when_the_server_is_down(tmp_path: Path) -> None:
    scene = write_scene(tmp_path / "scene.mp4", n=5)
    url = f"postgresql://ops:s3cret@127.0.0.1:{_closed_port()}/events"
    text = scene_config(scene, tmp_path).replace("storage:\n", f"storage:\n  postgresql: {url}\n")
    service = WatchService(
        parse_config(text, "watch.yaml"), detector_factory=lambda *a: BlobDetector(), out=io.StringIO()
    )
    with pytest.raises(
        ConfigError, match=r"watch.yaml:\d+: storage.postgresql: PostgreSQL at .* cannot be reached"
    ) as info:
        service.start()
    assert "s3cret" not in str(info.value) and "\n" not in str(info.value)


def test_a_database_with_someone_elses_events_table_is_refused(postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE events (id serial PRIMARY KEY, what text)")
    with pytest.raises(InvalidInputError, match="events table not created by CampusGuard"):
        open_event_store(postgres_url)


def test_cli_events_reads_a_postgres_url(postgres_url: str, make_event, capsys: pytest.CaptureFixture[str]) -> None:
    with open_event_store(postgres_url) as store:  # type: ignore[attr-defined]
        store.record(make_event())
        store.record(make_event(event_id="e2", camera_id="cam1"))
    assert main(["events", "--db", postgres_url, "--camera", "cam1", "--format", "json"]) == 0
    assert [r["event_id"] for r in json.loads(capsys.readouterr().out)] == ["e2"]
    assert main(["events", "--db", postgres_url]) == 0
    assert "2 events in postgresql://" in capsys.readouterr().out
    down = f"postgresql://ops:s3cret@127.0.0.1:{_closed_port()}/events"
    assert main(["events", "--db", down]) != 0
    err = capsys.readouterr().err.strip()
    assert "cannot be reached" in err and len(err.splitlines()) == 1 and "s3cret" not in err


def test_the_console_lists_and_reviews_incidents_stored_in_postgresql(postgres_url: str, tmp_path: Path) -> None:
    """`campusguard serve` on ``storage.postgresql``: the watched video's incidents listed, acknowledged, resolved."""
    pytest.importorskip("fastapi", reason="needs the console extra")
    sys.path.insert(1, str(Path(__file__).parents[1] / "console"))
    from fakes_console import console_yaml, make_console

    video = write_scene(tmp_path / "scene.mp4")
    config = tmp_path / "watch.yaml"
    config.write_text(console_yaml(video, tmp_path).replace("storage:\n", f"storage:\n  postgresql: {postgres_url}\n"))
    c = make_console(config, tmp_path, start=True)
    try:
        assert c.runtime.service is not None and c.runtime.service.wait(60)
        client = c.client()
        page = client.get("/api/v1/events", headers=c.bearer("vera")).json()
        assert page["total"] == 2 and sorted(e["kind"] for e in page["items"]) == ["fire_lane", "intrusion"]
        eid = next(e["id"] for e in page["items"] if e["kind"] == "intrusion")
        r = client.post(f"/api/v1/events/{eid}/ack", json={"note": "on my way"}, headers=c.bearer("otto"))
        assert r.status_code == 200 and r.json()["state"] == "acknowledged"
        assert client.post(f"/api/v1/events/{eid}/ack", json={}, headers=c.bearer("otto")).status_code == 409
        r = client.post(f"/api/v1/events/{eid}/resolve", json={}, headers=c.bearer("otto"))
        assert r.status_code == 200 and (r.json()["state"], r.json()["note"]) == ("resolved", "on my way")
        listed = client.get("/api/v1/events", params={"state": "resolved"}, headers=c.bearer("vera")).json()
        assert [e["id"] for e in listed["items"]] == [eid]
        assert not (tmp_path / "events.db").exists()  # nothing went to SQLite
    finally:
        c.runtime.stop()
        c.users.close()
    import psycopg

    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT state, resolved_by FROM events WHERE event_id = %s", (eid,)).fetchone() == (
            "resolved",
            "otto",
        )


def test_a_role_that_may_not_create_the_tables_gets_one_line(postgres_server: str, postgres_url: str) -> None:
    import uuid

    import psycopg

    role = f"cg_role_{uuid.uuid4().hex[:10]}"
    schema = postgres_url.rsplit("%3D", 1)[1]
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
    try:
        as_role = postgres_url.replace("postgres@", f"{role}@", 1)
        with pytest.raises(InvalidInputError, match=f"cannot be opened: permission denied for schema {schema}"):
            open_event_store(as_role)
        with pytest.raises(InvalidInputError, match="no schema of search_path nosuch exists"):
            open_event_store(as_role.rsplit("%3D", 1)[0] + "%3Dnosuch")
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")
