"""Retention (`campusguard.app.retention`): the config section, keep, the pruner on SQLite and PostgreSQL
(a real server, see ``conftest.py``), `campusguard prune`, and the cleanup thread."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from campusguard.app.config import parse_config
from campusguard.app.config.retention import parse_duration, parse_size
from campusguard.app.events import Event
from campusguard.app.events.store import UpsertingEventStore
from campusguard.app.infra.durable import AppendLog
from campusguard.app.retention import MediaLayout, Pruner, RetentionCleaner, RetentionPolicy
from campusguard.cli.main import main
from campusguard.errors import ConfigError

NOW = datetime.now(UTC)


# config -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0s", 0.0), ("45s", 45.0), ("30m", 1800.0), ("12h", 43200.0), ("30d", 2592000.0), ("2w", 1209600.0)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("text", "nbytes"), [("2MB", 2_000_000), ("50GB", 50 * 10**9), ("512KiB", 524288), ("0B", 0)])
def test_sizes(text: str, nbytes: int) -> None:
    assert parse_size(text) == nbytes


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        ("retention:\n  incidents: 3 days\n", r"c\.yaml:2: retention\.incidents: .*'3 days' is not a duration"),
        ("retention:\n  max_media: lots\n", r"c\.yaml:2: retention\.max_media: .*'lots' is not a size"),
        ("retention:\n  min_free: 95%\n", r"c\.yaml:2: retention\.min_free: .*at most 90%"),
        ("retention:\n  forever: true\n", r"c\.yaml:2: retention\.forever"),
        (
            "cameras:\n  - id: a\n    source: x.mp4\n    retention:\n      clips: soon\n",
            r"c\.yaml:5: cameras\[0\]\.retention\.clips: .*'soon' is not a duration",
        ),
    ],
)
def test_bad_retention_values_name_file_and_line(yaml_text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(yaml_text, "c.yaml")


def test_camera_override_and_defaults() -> None:
    cfg = parse_config(
        "cameras:\n  - {id: a, source: x.mp4, retention: {incidents: 1d}}\n  - {id: b, source: y.mp4}\n", "c.yaml"
    ).config
    policy = RetentionPolicy.from_config(cfg)
    assert policy.ttl("incidents", "a") == 86400 and policy.ttl("incidents", "b") == 90 * 86400
    assert policy.ttl("snapshots", "a") == 30 * 86400 and policy.max_media_bytes is None
    assert policy.min_free_bytes(10**12) == 10**9  # auto: 1 GB on a large volume
    assert policy.min_free_bytes(3 * 2**20) == int(0.05 * 3 * 2**20)  # at most 5% of a small one


# the pruner on both stores --------------------------------------------------------------------------
def _file(folder: Path, name: str, nbytes: int = 1000, age_s: float = 0.0) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(b"\xff" * nbytes)
    if age_s:
        t = time.time() - age_s
        os.utime(path, (t, t))
    return path


def _incident(
    store: UpsertingEventStore,
    make_event: Callable[..., Event],
    event_id: str,
    folder: Path,
    *,
    ended_ago_s: float | None,
    camera: str = "cam0",
    nbytes: int = 1000,
) -> Path:
    age = (ended_ago_s or 0) + 10
    snap = _file(folder / "snaps", f"{camera}_{event_id}.jpg", nbytes, age_s=age)
    _file(folder / "clips", f"{event_id}.mp4", nbytes, age_s=age)
    started = NOW - timedelta(seconds=age)
    store.record(make_event(event_id=event_id, camera_id=camera, started_at=started, snapshot_path=str(snap)))
    if ended_ago_s is not None:
        ended = NOW - timedelta(seconds=ended_ago_s)
        store.record(
            make_event(
                event_id=event_id,
                camera_id=camera,
                phase="end",
                end_s=20.0,
                started_at=started,
                ended_at=ended,
                snapshot_path=str(snap),
            )
        )
    return snap


def _layout(tmp_path: Path) -> MediaLayout:
    return MediaLayout(data_dir=tmp_path, snapshots_dir=tmp_path / "snaps", clips_dir=tmp_path / "clips")


def _policy(**changes: object) -> RetentionPolicy:
    base = RetentionPolicy.from_config(parse_config("", "c.yaml").config)
    return dataclasses.replace(base, min_free="0B", **changes)


def _ids(store: UpsertingEventStore) -> set[str]:
    return {r.event.event_id for r in store.query_records(limit=None)[0]}


def test_expired_incidents_go_with_their_media_and_kept_ones_stay(
    store: UpsertingEventStore, make_event: Callable[..., Event], tmp_path: Path
) -> None:
    day = 86400.0
    old = _incident(store, make_event, "old", tmp_path, ended_ago_s=100 * day)
    kept = _incident(store, make_event, "kept", tmp_path, ended_ago_s=100 * day)
    young = _incident(store, make_event, "young", tmp_path, ended_ago_s=1 * day)
    snap_only = _incident(store, make_event, "snaponly", tmp_path, ended_ago_s=40 * day)
    still_open = _incident(store, make_event, "open", tmp_path, ended_ago_s=None)
    record = store.keep("kept", True, user="ops")
    assert record.kept and record.kept_by == "ops" and record.to_dict()["kept"] is True
    pruner = Pruner(_policy(), _layout(tmp_path), store, ["cam0"])

    plan = pruner.plan()
    assert plan.rows == ["old"] and plan.cleared == ["snaponly"]
    report = pruner.apply(plan)
    assert report.rows == 1 and report.snapshots_cleared == 1
    assert report.files == {"snapshots": 2, "clips": 2} and report.bytes == {"snapshots": 2000, "clips": 2000}
    assert _ids(store) == {"kept", "young", "snaponly", "open"}
    assert not old.exists() and not snap_only.exists() and not (tmp_path / "clips" / "old.mp4").exists()
    assert kept.exists() and young.exists() and still_open.exists()
    # no row names a deleted file
    for rec in store.query_records(limit=None)[0]:
        assert rec.event.snapshot_path is None or Path(rec.event.snapshot_path).exists()
    store.keep("kept", False, user="ops")
    assert not store.get_record("kept").kept  # type: ignore[union-attr]
    with pytest.raises(KeyError):
        store.keep("nope", True, user="ops")


def test_older_than_0s_leaves_no_ended_incident_and_no_snapshot(
    store: UpsertingEventStore, make_event: Callable[..., Event], tmp_path: Path
) -> None:
    for i in range(7):
        _incident(store, make_event, f"e{i}", tmp_path, ended_ago_s=5.0 + i)
    pruner = Pruner(_policy().with_older_than(0.0), _layout(tmp_path), store, ["cam0"])
    report = pruner.run()
    assert report.rows == 7 and _ids(store) == set()
    assert list((tmp_path / "snaps").iterdir()) == [] and list((tmp_path / "clips").iterdir()) == []


def test_orphans_are_swept_after_the_grace_period(
    store: UpsertingEventStore, make_event: Callable[..., Event], tmp_path: Path
) -> None:
    named = _incident(store, make_event, "e1", tmp_path, ended_ago_s=10.0)
    old_orphan = _file(tmp_path / "snaps", "cam0_lost.jpg", age_s=7200)
    new_orphan = _file(tmp_path / "snaps", "cam0_fresh.jpg")  # perhaps not committed yet
    report = Pruner(_policy(), _layout(tmp_path), store, ["cam0"]).run()
    assert report.files == {"orphans": 1} and not old_orphan.exists()
    assert named.exists() and new_orphan.exists()


def test_max_media_deletes_recordings_then_clips_then_snapshots_oldest_first_and_keeps_rows(
    store: UpsertingEventStore, make_event: Callable[..., Event], tmp_path: Path
) -> None:
    for i in range(6):  # e0 is the oldest; each has a 100 kB snapshot and a 100 kB clip
        _incident(store, make_event, f"e{i}", tmp_path, ended_ago_s=600.0 - 60 * i, nbytes=100_000)
    # recordings newer than every incident's media, and a dead run's unfinished segment
    _file(tmp_path / "rec", "cam0_20260101T000000Z_0001.mp4", 300_000, age_s=30)
    _file(tmp_path / "rec", ".cam0_20260101T000100Z_0002.part.mp4", 200_000, age_s=20)
    store.keep("e0", True, user="ops")
    layout = dataclasses.replace(_layout(tmp_path), recordings_dir=tmp_path / "rec")
    report = Pruner(_policy(max_media_bytes=900_000), layout, store, ["cam0"]).run()
    snaps = sorted(p.name for p in (tmp_path / "snaps").iterdir())
    clips = sorted(p.name for p in (tmp_path / "clips").iterdir())
    assert sum(report.kept_bytes.values()) <= 900_000
    assert report.files == {"recordings": 2, "clips": 3}  # the dead run's segment counted and deleted too
    assert list((tmp_path / "rec").iterdir()) == []  # recordings first, though newer than the evidence
    assert clips == ["e0.mp4", "e4.mp4", "e5.mp4"]  # then clips, oldest first; the kept one's never
    assert snaps == [f"cam0_e{i}.jpg" for i in range(6)]  # every snapshot fits: all stay
    assert _ids(store) == {f"e{i}" for i in range(6)}  # every incident stays
    report = Pruner(_policy(max_media_bytes=300_000), layout, store, ["cam0"]).run()
    assert sorted(p.name for p in (tmp_path / "snaps").iterdir()) == ["cam0_e0.jpg", "cam0_e5.jpg"]
    assert sorted(p.name for p in (tmp_path / "clips").iterdir()) == ["e0.mp4"]  # kept: over the limit, stays
    for rec in store.query_records(limit=None)[0]:
        assert rec.event.snapshot_path is None or Path(rec.event.snapshot_path).exists()


def test_dry_run_changes_nothing(store: UpsertingEventStore, make_event: Callable[..., Event], tmp_path: Path) -> None:
    _incident(store, make_event, "e1", tmp_path, ended_ago_s=5.0)
    before = sorted(p.name for p in tmp_path.rglob("*") if p.is_file() and "events.db" not in p.name)
    report = Pruner(_policy().with_older_than(0.0), _layout(tmp_path), store, ["cam0"]).plan().report()
    assert report.dry_run and report.rows == 1 and report.files == {"snapshots": 1, "clips": 1}
    assert _ids(store) == {"e1"}
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file() and "events.db" not in p.name) == before


def test_jsonl_lines_older_than_their_retention_are_dropped_and_a_sink_appends_to_the_new_file(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    old = (NOW - timedelta(days=40)).isoformat()
    new = (NOW - timedelta(days=1)).isoformat()
    log.write_text(f'{{"event_id": "a", "started_at": "{old}"}}\n{{"event_id": "b", "started_at": "{new}"}}\n')
    appender = AppendLog(log)  # a sink holding it open (JsonlSink) goes on appending, to the new file
    inode = log.stat().st_ino
    report = Pruner(_policy(), MediaLayout(data_dir=tmp_path, logs=(log,)), None).run()
    assert log.stat().st_ino != inode  # a new file renamed over the old one, not a rewrite in place
    appender.append(b'{"event_id": "c"}\n')
    appender.close()
    assert report.lines == {"logs": 1}
    assert [line[:17] for line in log.read_text().splitlines()] == ['{"event_id": "b",', '{"event_id": "c"}']


# campusguard prune ----------------------------------------------------------------------------------
def _config(tmp_path: Path, target: str) -> Path:
    storage = f"postgresql: '{target}'" if target.startswith("postgresql") else f"sqlite: {target}"
    path = tmp_path / "watch.yaml"
    path.write_text(
        f"cameras: [{{id: cam0, source: x.mp4}}]\nstorage:\n  {storage}\n"
        f"outputs:\n  snapshots_dir: {tmp_path / 'snaps'}\n",
        encoding="utf-8",
    )
    return path


def test_cli_prune_dry_run_then_older_than_0s(
    store: UpsertingEventStore,
    target: str,
    make_event: Callable[..., Event],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for i in range(3):
        _incident(store, make_event, f"e{i}", tmp_path, ended_ago_s=30.0)
    _incident(store, make_event, "k", tmp_path, ended_ago_s=30.0)
    store.keep("k", True, user="ops")
    config = _config(tmp_path, target)
    assert main(["prune", str(config), "--older-than", "0s", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "incidents: 3 row(s) would be deleted" in out and "snapshots: 3 file(s), would free 3.0 KB" in out
    assert _ids(store) == {"e0", "e1", "e2", "k"}
    assert main(["prune", str(config), "--older-than", "0s"]) == 0
    out = capsys.readouterr().out
    assert "incidents: 3 row(s) deleted" in out and "snapshots: 3 file(s), freed 3.0 KB" in out
    assert _ids(store) == {"k"}
    assert [p.name for p in (tmp_path / "snaps").iterdir()] == ["cam0_k.jpg"]


def test_cli_prune_bad_duration_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, str(tmp_path / "events.db"))
    assert main(["prune", str(config), "--older-than", "soon"]) != 0
    assert "--older-than: 'soon' is not a duration" in capsys.readouterr().err


# the cleanup thread ---------------------------------------------------------------------------------
def test_make_room_runs_a_pass_at_once(tmp_path: Path) -> None:
    old = _file(tmp_path / "video", "cam0.000.mp4", 50_000, age_s=3600)
    layout = MediaLayout(data_dir=tmp_path, recordings_dir=tmp_path / "video")
    cleaner = RetentionCleaner(Pruner(_policy(), layout, None, ["cam0"]), interval_s=3600, check_s=3600)
    cleaner.start()
    try:
        time.sleep(0.2)  # the first pass at start: nothing due
        assert old.exists()
        free = layout.free_bytes()[0]
        assert cleaner.make_room(free + 10**15, wait_s=10.0) is False  # more than the disk can ever give
        assert not old.exists()  # but the oldest media went to make room
        assert cleaner.metrics.files_pruned == {"recordings": 1} and cleaner.metrics.passes >= 2
    finally:
        cleaner.stop()


def test_watch_keeps_media_under_max_media_and_stores_every_incident(tmp_path: Path) -> None:
    """A real run (scene video, blob detector, recording and snapshots) with a tiny `max_media`."""
    import io

    from fakes_watch import blob_detector_factory, scene_config, write_scene

    from campusguard.app.events import read_events
    from campusguard.app.service import WatchService

    video = write_scene(tmp_path / "scene.mp4", n=120)
    results = {}
    for name, extra in (
        ("free", "retention: {enabled: false}\n"),
        ("capped", "retention: {max_media: 30KB, check_s: 0.2}\n"),
    ):
        out = tmp_path / name
        out.mkdir()
        text = scene_config(video, out, extra).replace(
            "metrics_interval_s: 0", "metrics_interval_s: 0\n  annotated_segment_s: 2"
        )
        service = WatchService(parse_config(text, "c.yaml"), detector_factory=blob_detector_factory, out=io.StringIO())
        assert service.run()
        media = [p for d in ("video", "snaps") for p in (out / d).glob("*")]
        events = read_events(out / "events.db")
        results[name] = (sum(p.stat().st_size for p in media), sorted(e.event_id for e in events), events)
    assert results["free"][0] > 30_000  # the limit is really crossed without retention
    assert results["capped"][0] <= 30_000
    assert results["capped"][1] == results["free"][1] and results["free"][1]  # every incident stored
    assert all(e.snapshot_path is None or Path(e.snapshot_path).exists() for e in results["capped"][2])


def test_redacted_variants_go_with_their_sharp_media_and_are_no_orphans(
    store: UpsertingEventStore, make_event: Callable[..., Event], tmp_path: Path
) -> None:
    """Blur by role writes ``<snapshot>.redacted.jpg`` and ``<event>.redacted.mp4`` beside the sharp files."""
    from campusguard.app.media.redact import redacted_path

    day = 86400.0
    variants = {}
    for event_id, ago in (("old", 100 * day), ("kept", 100 * day), ("young", 1 * day)):
        snap = _incident(store, make_event, event_id, tmp_path, ended_ago_s=ago)
        age = ago + 10
        variants[event_id] = (
            _file(snap.parent, redacted_path(snap).name, age_s=age),
            _file(tmp_path / "clips", f"{event_id}.redacted.mp4", age_s=age),
        )
    store.keep("kept", True, user="ops")
    report = Pruner(_policy(), _layout(tmp_path), store, ["cam0"]).run()
    assert report.rows == 1 and report.files == {"snapshots": 2, "clips": 2}  # old's sharp and redacted files
    assert not any(p.exists() for p in variants["old"])
    assert all(p.exists() for p in variants["kept"] + variants["young"])  # not orphans: their sharp file is named


def test_evidence_never_goes_to_make_up_for_the_segment_being_written(
    store: UpsertingEventStore, make_event: Callable[..., Event], tmp_path: Path
) -> None:
    """The open segment counts in ``max_media`` but cannot go while written: the snapshots stay
    (they kept 0 bytes of evidence before); at the stop the finished segment goes first."""
    for i in range(3):
        _incident(store, make_event, f"e{i}", tmp_path, ended_ago_s=60.0 - 10 * i, nbytes=50_000)
    for clip in (tmp_path / "clips").iterdir():
        clip.unlink()
    _file(tmp_path / "rec", "cam0_20260101T000000Z_0001.mp4", 400_000, age_s=300)  # finished
    _file(tmp_path / "rec", ".cam0_20260101T000500Z_0002.part.mp4", 1_000_000)  # being written now
    layout = dataclasses.replace(_layout(tmp_path), recordings_dir=tmp_path / "rec")
    pruner = Pruner(_policy(max_media_bytes=500_000), layout, store, ["cam0"])
    pruner.started_at -= 60  # the segment was opened by this run
    report = pruner.run()
    assert report.files == {"recordings": 1}  # the finished segment; no snapshot for the open one
    assert len(list((tmp_path / "snaps").iterdir())) == 3
    (tmp_path / "rec" / ".cam0_20260101T000500Z_0002.part.mp4").rename(
        tmp_path / "rec" / "cam0_20260101T000500Z_0002.mp4"
    )
    report = pruner.run(writers_idle=True)  # the pass at the stop
    assert report.files == {"recordings": 1} and list((tmp_path / "rec").iterdir()) == []
    assert len(list((tmp_path / "snaps").iterdir())) == 3 and sum(report.kept_bytes.values()) <= 500_000


def test_track_files_expire_with_retention_tracks_and_go_after_recordings_for_space(tmp_path: Path) -> None:
    tracks = tmp_path / "tracks"
    old = _file(tracks, "cam0_20260101T00Z_abc.cgtracks", 50_000, age_s=31 * 86400)
    recent = _file(tracks, "cam0_20260101T01Z_abc.cgtracks", 50_000, age_s=3600)
    writing = _file(tracks, "cam0_20260101T02Z_abc.cgtracks", 50_000, age_s=5)
    layout = MediaLayout(data_dir=tmp_path, recordings_dir=tmp_path / "rec", tracks_dir=tracks)
    assert parse_config("", "c.yaml").config.retention.tracks == "30d"
    report = Pruner(_policy(), layout, None, ["cam0"]).run()
    assert report.files == {"tracks": 1} and not old.exists() and recent.exists()
    # over max_media: the recordings go first, then the oldest track files; the one being written stays
    _file(tmp_path / "rec", "cam0_20260101T000000Z_0001.mp4", 100_000, age_s=60)
    report = Pruner(_policy(max_media_bytes=60_000), layout, None, ["cam0"]).run()
    assert report.files == {"recordings": 1, "tracks": 1} and not recent.exists() and writing.exists()
