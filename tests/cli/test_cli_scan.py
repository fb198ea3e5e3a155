"""`campusguard scan` through the real entry point, with the bundled model on synthetic campus video."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from campusguard.app.demo import demo_config
from campusguard.app.events import read_events
from campusguard.app.events.types import Event
from campusguard.cli.main import main
from campusguard.data.synth.video import generate_video


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A 12 s synthetic campus video at 5 fps (a crowd gathers from 3 s) and its ground truth.

    5 fps (60 frames) rather than the demo's 10: the crowd is still found in every copy, and the
    scans below cost half the detector calls (CI time)."""
    folder = tmp_path_factory.mktemp("synth")
    truth = generate_video(0, folder, size_wh=(640, 360), seconds=12, fps=5, name="clip")
    return folder / "clip.mp4", truth.to_dict()


def write_config(clip: tuple[Path, dict], out: Path) -> Path:
    """The demo's config for the clip (the bundled model at 320), events into ``out``, no other output."""
    video, truth = clip
    out.mkdir(parents=True, exist_ok=True)
    cfg = demo_config(truth, video, out)
    cfg.update(alerts=[], outputs={"metrics_interval_s": 0})
    path = out / "watch.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def facts(e: Event) -> tuple:
    return (e.camera_id, e.rule_kind, e.zone, e.start_s, e.end_s, e.start_frame, e.end_frame, e.tracker_ids, e.count)


def test_scan_with_the_bundled_model_finds_what_watch_finds(clip: tuple[Path, dict], tmp_path: Path) -> None:
    watch_cfg = write_config(clip, tmp_path / "watch")
    assert main(["watch", str(watch_cfg)]) == 0
    scan_cfg = write_config(clip, tmp_path / "scan")
    assert main(["scan", str(clip[0]), "--config", str(scan_cfg), "--workers", "1"]) == 0
    watched = read_events(tmp_path / "watch" / "events.db")
    scanned = read_events(tmp_path / "scan" / "events.db")
    assert watched and sorted(map(facts, scanned)) == sorted(map(facts, watched))
    assert (tmp_path / "scan" / "events.scan-state.db").is_file()


def test_scan_bad_arguments_are_one_line(
    clip: tuple[Path, dict], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = write_config(clip, tmp_path)
    for args, fragment in [
        ([str(tmp_path / "nothing-here")], "no such file or folder"),
        ([str(clip[0]), "--camera", "gate"], "has no camera 'gate'; its cameras: cam0"),
    ]:
        assert main(["scan", *args, "--config", str(cfg)]) != 0
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and fragment in err[0] and err[0].startswith("error: ")


def rows(db: Path) -> tuple[int, list[tuple]]:
    """Row count and every incident's id, facts and lifecycle status."""
    with sqlite3.connect(db) as conn:
        (count,) = conn.execute("SELECT COUNT(*) FROM events").fetchone()
    return count, sorted((e.event_id, facts(e), e.is_open) for e in read_events(db))


def done_files(state: Path) -> int:
    try:
        with sqlite3.connect(f"file:{state}?mode=ro", uri=True) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM scanned").fetchone()[0])
    except sqlite3.Error:  # not created yet
        return 0


def scan_command(archive: Path, cfg: Path) -> list[str]:
    return [sys.executable, "-m", "campusguard.cli.main", "scan", str(archive), "--config", str(cfg), "--workers", "2"]


def test_a_scan_killed_mid_run_resumes_without_duplicates(clip: tuple[Path, dict], tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    archive.mkdir()
    copies = 3  # three recordings on two workers: one still queued when the first two commit
    for i in range(copies):  # the same footage under three names: three sets of incidents
        shutil.copy(clip[0], archive / f"day{i}.mp4")
    full_cfg = write_config(clip, tmp_path / "uninterrupted")
    subprocess.run(scan_command(archive, full_cfg), check=True, capture_output=True, timeout=300)
    expected = rows(tmp_path / "uninterrupted" / "events.db")
    assert expected[0] >= copies and expected[0] % copies == 0  # every copy raised the same incidents, own ids

    cfg = write_config(clip, tmp_path / "killed")
    state = tmp_path / "killed" / "events.scan-state.db"
    proc = subprocess.Popen(scan_command(archive, cfg), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while done_files(state) == 0:  # some recordings committed, the others still running or queued
        assert proc.poll() is None and time.monotonic() < deadline, "the scan ended before it could be killed"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    killed_at = done_files(state)
    assert proc.returncode == -signal.SIGKILL and 0 < killed_at < copies
    resumed = subprocess.run(scan_command(archive, cfg), check=True, capture_output=True, text=True, timeout=300)
    assert f"scanned {copies - killed_at} of {copies} file(s) ({killed_at} already done)" in resumed.stdout
    assert rows(tmp_path / "killed" / "events.db") == expected
