"""`GET /api/v1/storage`: the data volume's free space, media kept by kind, the retention limits and full volumes."""

from __future__ import annotations

import shutil
from pathlib import Path

from campusguard.app.infra.diskspace import disk_health


def test_storage_reports_the_data_volume_and_the_limits(console) -> None:
    r = console.client().get("/api/v1/storage", headers=console.bearer("vera"))
    assert r.status_code == 200
    body = r.json()
    usage = shutil.disk_usage(console.runtime.media_dir if console.runtime.media_dir.exists() else Path("."))
    assert 0 < body["total_bytes"] == usage.total
    assert 0 <= body["free_bytes"] <= body["total_bytes"]
    assert body["max_media_bytes"] is None  # no retention.max_media in the console's config
    assert body["min_free_bytes"] == min(1_000_000_000, int(0.05 * usage.total))  # the default floor, auto
    assert body["media_bytes"] == {}  # no cleanup pass yet: the runtime was not started
    assert body["full_volumes"] == []


def test_a_full_volume_is_listed(console, tmp_path: Path) -> None:
    health = disk_health()
    health.failed("snapshot", tmp_path / "x.jpg", OSError(28, "No space left on device"))
    try:
        full = console.client().get("/api/v1/storage", headers=console.bearer("otto")).json()["full_volumes"]
        assert len(full) == 1 and "No space left" in full[0]["last_error"] and full[0]["volume"]
        # a viewer gets the sizes, not the mount point nor the error
        seen = console.client().get("/api/v1/storage", headers=console.bearer("vera")).json()["full_volumes"]
        assert seen == [{"volume": None, "free_bytes": full[0]["free_bytes"], "last_error": None}]
        # the public readiness check says "disk full" and nothing of the path or the error
        public = console.client().get("/readyz")
        assert public.status_code == 503 and public.json() == {"ready": False}  # no reason, path, camera or host
        detailed = console.client().get("/readyz", headers=console.bearer("otto")).json()["problems"]
        assert any(full[0]["volume"] in p and "No space left" in p for p in detailed)
        viewer = console.client().get("/readyz", headers=console.bearer("vera")).json()
        assert viewer["problems"] == ["no camera produced a frame recently", "disk full"]  # no path, no error
        assert "cam1" in viewer["cameras_down"]
    finally:
        health.ok(tmp_path / "x.jpg")  # a write that went through: the volume has room again
    assert console.client().get("/api/v1/storage", headers=console.bearer("vera")).json()["full_volumes"] == []


def test_storage_needs_credentials(console) -> None:
    assert console.client().get("/api/v1/storage").status_code == 401


def test_readyz_names_the_cameras_without_a_frame_to_signed_in_users_only(console) -> None:
    """The runtime is not started: its camera has no frame; a signed-in viewer reads why and which,
    the public answer only that it is not ready (issue 44: the public /readyz names no camera and no host)."""
    r = console.client().get("/readyz", headers=console.bearer("vera"))
    assert r.status_code == 503 and r.json()["problems"] == ["no camera produced a frame recently"]
    assert list(r.json()["cameras_down"]) == ["cam1"]
    public = console.client().get("/readyz")
    assert public.status_code == 503 and public.json() == {"ready": False} and "cam1" not in public.text
