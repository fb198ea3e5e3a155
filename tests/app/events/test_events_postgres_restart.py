"""A PostgreSQL server restarted in the middle of a watch run loses and duplicates nothing, and neither
does a watch stopped while the server is down (its updates are spooled and replayed at the next start).

These tests start their own server (``initdb`` and ``pg_ctl`` from PATH, as an unprivileged
user when run as root: PostgreSQL refuses root) on a free loopback port, so they can stop it
with ``pg_ctl stop -m immediate`` (a crash: no shutdown checkpoint, clients cut) and start it
again.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(1, str(Path(__file__).parents[1]))
from fakes_watch import BlobDetector, scene_config, write_scene  # noqa: E402

from campusguard.app.config import parse_config  # noqa: E402
from campusguard.app.events import StoreUnavailableError, read_events  # noqa: E402
from campusguard.app.service import WatchService  # noqa: E402
from campusguard.detections import Detections  # noqa: E402

psycopg = pytest.importorskip("psycopg", reason="the PostgreSQL tests need psycopg: pip install -e '.[postgres]'")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalPostgres:
    """A throw-away PostgreSQL server on 127.0.0.1 (trust auth, user ``postgres``), in a temporary folder."""

    def __init__(self) -> None:
        initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
        if not (initdb and pg_ctl):
            pytest.skip("initdb and pg_ctl are not on PATH (Debian: apt-get install postgresql)")
        self.pg_ctl = pg_ctl
        self.prefix: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            runuser = shutil.which("runuser")
            if runuser is None:
                pytest.skip("running as root without runuser: cannot start PostgreSQL as an unprivileged user")
            self.prefix = [runuser, "-u", "nobody", "--"]
        self.root = Path(tempfile.mkdtemp(prefix="cg-pg-", dir="/tmp"))
        self.root.chmod(0o755)
        if self.prefix:
            os.chown(self.root, 65534, 65534)
        self.data = self.root / "data"
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        init = self._run([initdb, "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8"])
        if init.returncode != 0:
            pytest.skip(f"initdb failed as {'nobody' if self.prefix else 'this user'}: {init.stderr.strip()[-300:]}")

    def _run(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.prefix, *args], capture_output=True, text=True, cwd=self.root, timeout=60)

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root}"
        done = self._run(
            [self.pg_ctl, "start", "-w", "-D", str(self.data), "-l", str(self.root / "log"), "-o", options]
        )
        assert done.returncode == 0, done.stdout + done.stderr + (self.root / "log").read_text()

    def stop(self, mode: str = "fast") -> None:
        self._run([self.pg_ctl, "stop", "-w", "-m", mode, "-D", str(self.data)])

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="module")
def server() -> Iterator[LocalPostgres]:
    pg = LocalPostgres()
    try:
        pg.start()
        yield pg
    finally:
        pg.remove()


@pytest.fixture
def fresh_db(server: LocalPostgres) -> Iterator[str]:
    """A URL of a fresh database on the test's own server (the server is started if a test left it down)."""
    if not _answers(server.url):
        server.start()
    name = f"cg_{time.monotonic_ns()}"
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield server.url.rsplit("/", 1)[0] + f"/{name}"
    if not _answers(server.url):
        server.start()
    with psycopg.connect(server.url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2):
            return True
    except psycopg.Error:
        return False


class PacedBlobDetector(BlobDetector):
    """`BlobDetector` taking ``seconds_per_image`` per frame: a file run lasts long enough to cut the server mid-run,
    and (unlike ``realtime: true``) no frame is dropped, so the run's events are exactly a fast run's."""

    def __init__(self, seconds_per_image: float) -> None:
        super().__init__()
        self.seconds_per_image = seconds_per_image

    def predict_batch(self, images: list[np.ndarray]) -> list[Detections]:
        time.sleep(self.seconds_per_image * len(images))
        return super().predict_batch(images)


def _final_states(events: list) -> list[tuple]:
    return sorted((e.event_id, e.rule_kind, e.start_s, e.end_s, e.tracker_ids, e.count) for e in events)


def _sink_lines(path: Path) -> list[tuple[str, str]]:
    return sorted((d["event_id"], d["phase"]) for d in map(json.loads, path.read_text().splitlines()))


def _reference_run(scene: Path, folder: Path) -> tuple[list[tuple], list[tuple[str, str]]]:
    """The final states and alert lines of ``scene`` through the same pipeline into SQLite, nothing interrupted."""
    folder.mkdir()
    reference = WatchService(
        parse_config(scene_config(scene, folder), "ref.yaml"),
        detector_factory=lambda *a: BlobDetector(),
        out=io.StringIO(),
    )
    assert reference.run()
    expected = _final_states(read_events(folder / "events.db"))
    expected_lines = _sink_lines(folder / "events.jsonl")
    assert len(expected) == 2 and len(expected_lines) == 4
    return expected, expected_lines


def _postgres_watch(scene: Path, folder: Path, url: str, retry: str, paced_s: float = 0.0) -> WatchService:
    """A `WatchService` on ``scene`` committing to ``url`` (``retry``: the storage section's retry settings)."""
    folder.mkdir(exist_ok=True)
    text = scene_config(scene, folder).replace("storage:\n", f"storage:\n  postgresql: {url}\n  retry: {retry}\n")
    return WatchService(
        parse_config(text, "pg.yaml"), detector_factory=lambda *a: PacedBlobDetector(paced_s), out=io.StringIO()
    )


def _wait_for_first_alert(sink: Path) -> None:
    deadline = time.monotonic() + 20
    while not (sink.exists() and sink.read_text().strip()):
        assert time.monotonic() < deadline, "no event reached the sink"
        time.sleep(0.02)


def _stored(url: str) -> dict[str, int]:
    """Event id to its number of rows in the store."""
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT event_id, COUNT(*) FROM events GROUP BY event_id").fetchall())


def test_a_server_restart_mid_run_loses_and_duplicates_no_event(
    server: LocalPostgres, fresh_db: str, tmp_path: Path
) -> None:
    scene = write_scene(tmp_path / "scene.mp4")
    expected, expected_lines = _reference_run(scene, tmp_path / "ref")

    # the run under test: PostgreSQL, a call retried for at most 0.2 s, so the outage reaches the event worker
    service = _postgres_watch(scene, tmp_path / "pg", fresh_db, "{budget_s: 0.2, initial_s: 0.05}", paced_s=0.06)
    sink = tmp_path / "pg" / "events.jsonl"
    service.start()
    _wait_for_first_alert(sink)  # the first event is committed and delivered ...
    server.stop("immediate")  # ... then the server crashes, clients cut, mid-run
    time.sleep(1.5)
    server.start()
    assert service.wait(30)
    assert service.finish()

    assert service.event_worker is not None and service.event_worker.store_retries >= 1  # the outage hit writes
    rows = _stored(fresh_db)
    assert set(rows.values()) == {1} and len(rows) == len(expected)
    from campusguard.app.events import open_event_store

    with open_event_store(fresh_db, read_only=True) as store:  # type: ignore[attr-defined]
        assert _final_states(store.query()) == expected
        assert all(e.end_s is not None for e in store.query())
    assert _sink_lines(sink) == expected_lines  # every alert line delivered, once


def test_a_stop_while_the_server_is_down_spools_and_the_next_start_replays(
    server: LocalPostgres, fresh_db: str, tmp_path: Path
) -> None:
    scene = write_scene(tmp_path / "scene.mp4")
    expected, expected_lines = _reference_run(scene, tmp_path / "ref")
    folder, sink = tmp_path / "pg", tmp_path / "pg" / "events.jsonl"
    spool = folder / "events.spool.jsonl"  # the default: beside storage.sqlite

    # run 1: the server crashes after the first alert and stays down; a store call would retry for 30 s
    first = _postgres_watch(scene, folder, fresh_db, "{budget_s: 30, initial_s: 0.05, max_s: 0.5}", paced_s=0.06)
    first.start()
    _wait_for_first_alert(sink)
    server.stop("immediate")
    deadline = time.monotonic() + 30
    while any(t.is_alive() for t in first.threads if t.name.startswith("analytics-")):  # the file is done and
        assert time.monotonic() < deadline, "the analytics worker did not finish the file"  # every incident ended
        time.sleep(0.05)
    first.stop()  # CampusGuard is stopped while the server is still down
    assert first.wait(10), "the event worker did not stop while the store was down"
    assert first.finish()
    worker = first.event_worker
    assert worker is not None and worker.store_retries >= 1 and worker.spooled >= 1
    spooled = [json.loads(line) for line in spool.read_text().splitlines()]
    delivered = _sink_lines(sink)
    assert len(spooled) == worker.spooled and len(spooled) + len(delivered) == len(expected_lines)  # none lost
    assert sorted(delivered + [(d["event_id"], d["phase"]) for d in spooled]) == expected_lines

    # run 2: the server is back; a short quiet file raises no incident of its own
    server.start()
    from campusguard.app.events import open_event_store

    with open_event_store(fresh_db, read_only=True) as store:  # type: ignore[attr-defined]
        # the spooled updates are not in the store yet: an incident whose end was spooled is stored open or not at all
        # (whether the second incident's start got in before the crash is a race, so the rows are not counted)
        ended = {e.event_id for e in store.query() if not e.is_open}
    spooled_ends = {d["event_id"] for d in spooled if d["phase"] == "end"}
    assert spooled_ends and not spooled_ends & ended
    quiet = write_scene(tmp_path / "quiet.mp4", n=5)
    second = _postgres_watch(quiet, folder, fresh_db, "{budget_s: 5, initial_s: 0.05}")
    assert second.run()
    assert second.event_worker is not None and second.event_worker.replayed == len(spooled)
    assert not spool.exists()  # removed once every line was committed
    rows = _stored(fresh_db)
    assert set(rows.values()) == {1} and len(rows) == len(expected)  # every incident once ...
    with open_event_store(fresh_db, read_only=True) as store:  # type: ignore[attr-defined]
        assert _final_states(store.query()) == expected  # ... in its final state
    assert _sink_lines(sink) == expected_lines  # every alert delivered, once


def test_stop_retrying_cuts_a_write_retrying_a_lost_server_short(
    server: LocalPostgres, fresh_db: str, make_event
) -> None:
    from campusguard.app.events.postgres import PostgresEventStore, RetryPolicy

    store = PostgresEventStore(fresh_db, retry=RetryPolicy(budget_s=60, initial_s=0.1, max_s=0.5))
    try:
        server.stop("immediate")
        threading.Timer(0.5, store.stop_retrying).start()
        t0 = time.monotonic()
        with pytest.raises(StoreUnavailableError, match="storing event e1"):
            store.record(make_event())
        assert time.monotonic() - t0 < 5  # not the 60 s budget
    finally:
        store.close()
        if not _answers(server.url):
            server.start()


def test_reads_and_writes_wait_for_a_restarting_server(server: LocalPostgres, fresh_db: str, make_event) -> None:
    from campusguard.app.events.postgres import PostgresEventStore, RetryPolicy

    with PostgresEventStore(fresh_db, retry=RetryPolicy(budget_s=20, initial_s=0.05, max_s=0.5)) as store:
        store.record(make_event())
        server.stop("immediate")
        restart = threading.Timer(1.0, server.start)
        restart.start()
        try:
            assert store.get("e1") == make_event()  # the read reconnected once the server was back
        finally:
            restart.join()
        server.stop("immediate")
        restart = threading.Timer(1.0, server.start)
        restart.start()
        try:
            store.record(make_event(phase="end", end_s=20.0))  # the write too
        finally:
            restart.join()
        assert store.get("e1") == make_event(phase="end", end_s=20.0)


def test_a_write_past_the_retry_budget_raises_a_typed_error(server: LocalPostgres, fresh_db: str, make_event) -> None:
    from campusguard.app.events.postgres import PostgresEventStore, RetryPolicy

    store = PostgresEventStore(fresh_db, retry=RetryPolicy(budget_s=0.5, initial_s=0.1, max_s=0.2))
    try:
        server.stop("immediate")
        t0 = time.monotonic()
        with pytest.raises(StoreUnavailableError, match="storing event e1") as info:
            store.record(make_event())
        assert time.monotonic() - t0 < 5 and "\n" not in str(info.value)
        server.start()
        store.record(make_event())  # the caller's retry succeeds once the server is back
        assert store.get("e1") == make_event()
    finally:
        store.close()
        if not _answers(server.url):
            server.start()


def test_the_console_answers_503_while_the_server_is_down(server: LocalPostgres, fresh_db: str, tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="needs the console extra")
    sys.path.insert(1, str(Path(__file__).parents[1] / "console"))
    from fakes_console import console_yaml, make_console

    video = write_scene(tmp_path / "scene.mp4", n=20)
    config = tmp_path / "watch.yaml"
    storage = f"storage:\n  postgresql: {fresh_db}\n  retry: {{budget_s: 0.3, initial_s: 0.1}}\n"
    config.write_text(console_yaml(video, tmp_path).replace("storage:\n", storage))
    c = make_console(config, tmp_path, start=True)
    try:
        assert c.runtime.service is not None and c.runtime.service.wait(60)
        client = c.client()
        assert client.get("/api/v1/events", headers=c.bearer("vera")).status_code == 200
        server.stop("immediate")
        r = client.get("/api/v1/events", headers=c.bearer("vera"))
        assert r.status_code == 503 and r.headers["retry-after"] == "5" and "unavailable" in r.json()["detail"]
        server.start()
        assert client.get("/api/v1/events", headers=c.bearer("vera")).status_code == 200
    finally:
        c.runtime.stop()
        c.users.close()
