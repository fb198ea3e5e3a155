"""The media policy an incident was recorded under, and what a viewer may be given of its media
(issue 32, target 1), through a real uvicorn and the real pipeline.

A camera with ``blur: persons`` records its incidents (sharp and redacted snapshots and clips); the
camera is then renamed in the config (``cam1`` -> ``courtyard``) and the console restarted over the
same store and media. The config no longer names the incidents' camera, but each incident holds the
policy its media were made under: a viewer gets the redacted variants and not one byte of a sharp
file (any URL, any Range), and the operator's sharp downloads are still audited. A row without a
known policy (recorded before it was kept) fails closed the same way.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import cv2
import httpx
import numpy as np
import pytest
from fakes_console import ConsoleUnderTest, LiveServer, console_yaml, make_console, start_server, stop_server

from campusguard.app.events.types import Event
from campusguard.app.media.redact import redacted_path

BLUR = "    privacy:\n      blur: persons\n"


@pytest.fixture(scope="module")
def renamed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveServer, list[Path]]]:
    """Incidents of ``cam1`` recorded under blur; then the camera renamed and the console restarted
    (not started: nothing new is recorded) behind a real uvicorn. Yields the server and every sharp
    media file the first run wrote."""
    from fakes_watch import write_scene

    tmp = tmp_path_factory.mktemp("media-policy")
    video = write_scene(tmp / "scene.mp4")
    config = tmp / "watch.yaml"
    text = console_yaml(video, tmp).replace("    zones:\n", BLUR + "    zones:\n", 1)
    config.write_text(text)
    (tmp / "first").mkdir()
    first = make_console(config, tmp / "first", start=True)
    runtime = first.runtime
    assert runtime.service is not None and runtime.service.wait(60), "the pipeline did not finish the video"
    deadline = time.monotonic() + 30  # a clip is written once its camera has been idle a moment
    while not list(runtime.clips_dir.glob("*.redacted.mp4")) and time.monotonic() < deadline:
        time.sleep(0.1)
    runtime.stop()
    first.users.close()
    sharp = [
        p for p in [*runtime.snapshots_dir.glob("*.jpg"), *runtime.clips_dir.glob("*.mp4")] if ".redacted" not in p.name
    ]
    assert sharp and all(redacted_path(p).is_file() for p in sharp), (
        "blur on: every sharp file has its redacted variant"
    )
    config.write_text(text.replace("  - id: cam1\n", "  - id: courtyard\n"))
    (tmp / "second").mkdir()
    second = make_console(config, tmp / "second")
    live = start_server(second)
    try:
        yield live, sharp
    finally:
        stop_server(live)
        second.runtime.stop()
        second.users.close()


def _client(live: LiveServer, user: str) -> httpx.Client:
    return httpx.Client(base_url=live.url, headers=live.console.bearer(user), timeout=30)


def _media_urls(event_id: str) -> list[str]:
    return [f"/api/v1/events/{event_id}/snapshot.jpg", f"/api/v1/events/{event_id}/clip.mp4"]


def test_a_viewer_gets_no_byte_of_a_sharp_file_after_the_camera_was_renamed(renamed) -> None:
    live, sharp_files = renamed
    console: ConsoleUnderTest = live.console
    assert "cam1" not in console.runtime.camera_names()
    sharp = {p.read_bytes() for p in sharp_files}
    redacted = {redacted_path(p).read_bytes() for p in sharp_files}
    with _client(live, "vera") as viewer:
        events = viewer.get("/api/v1/events?limit=500").json()["items"]
        assert events and {e["camera"] for e in events} == {"cam1"}
        assert {e["media_blur"] for e in events} == {"persons"}  # the policy each incident was recorded under
        served = 0
        for event in events:
            offered = [u for u in (event["snapshot_url"], event["clip_url"]) if u]
            assert offered, "a viewer is offered the redacted media"
            for url in _media_urls(event["id"]):
                for headers in ({}, {"Range": "bytes=0-"}, {"Range": "bytes=1-"}, {"Range": "bytes=-100000000"}):
                    r = viewer.get(url, headers=headers)
                    assert r.status_code in (200, 206, 404), (url, headers, r.status_code)
                    if r.status_code == 404:
                        continue
                    served += 1
                    # 0 bytes of a sharp file: each answer is (a range of) a redacted variant, never of a sharp one
                    assert r.content and any(r.content in f for f in redacted), (url, headers)
                    assert not any(r.content in f for f in sharp), (url, headers)
        assert served >= 4 * len(events)


def test_the_operators_sharp_downloads_stay_audited_after_the_rename(renamed) -> None:
    live, sharp_files = renamed
    console: ConsoleUnderTest = live.console
    by_name = {p.name: p.read_bytes() for p in sharp_files}
    with _client(live, "otto") as operator:
        event = next(e for e in operator.get("/api/v1/events").json()["items"] if e["clip_url"])
        before = console.audit_count()
        r = operator.get(event["clip_url"])
        assert r.status_code == 200 and r.content == by_name[f"{event['id']}.mp4"]  # the operator sees it sharp
    entries, total = console.users.audit_entries(limit=1)
    assert total == before + 1
    assert entries[0].action == "media.clip.sharp" and entries[0].user == "otto" and entries[0].target == event["id"]
    assert entries[0].details["blur"] == "persons" and entries[0].details["camera"] == "cam1"


def _jpeg(path: Path, value: int) -> bytes:
    ok, data = cv2.imencode(".jpg", np.full((40, 60, 3), value, np.uint8))
    assert ok
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.tobytes())
    return data.tobytes()


def _stored(console: ConsoleUnderTest, event_id: str, media_blur: str | None, snapshot: Path) -> None:
    console.runtime.store.record(
        Event(
            event_id=event_id,
            phase="start",
            camera_id="cam1",
            rule_name="intrusion:east",
            rule_kind="intrusion",
            zone="east",
            start_s=1.0,
            snapshot_path=str(snapshot),
            media_blur=media_blur,
        )
    )


def test_media_of_an_unknown_policy_is_withheld_from_viewers_and_audited_for_operators(console) -> None:
    """A camera without blur in the config: media recorded under ``none`` are a viewer's to see; a row
    whose policy is unknown (NULL, from before it was stored) is taken as the strictest."""
    snaps = console.runtime.snapshots_dir
    known = _jpeg(snaps / "known.jpg", 90)
    unknown = _jpeg(snaps / "unknown.jpg", 200)
    _stored(console, "known", "none", snaps / "known.jpg")
    _stored(console, "unknown", None, snaps / "unknown.jpg")
    client = console.client()
    r = client.get("/api/v1/events/known/snapshot.jpg", headers=console.bearer("vera"))
    assert r.status_code == 200 and r.content == known
    as_viewer = client.get("/api/v1/events/unknown", headers=console.bearer("vera")).json()
    assert as_viewer["media_blur"] is None and as_viewer["snapshot_url"] is None
    assert client.get("/api/v1/events/unknown/snapshot.jpg", headers=console.bearer("vera")).status_code == 404
    before = console.audit_count()
    r = client.get("/api/v1/events/unknown/snapshot.jpg", headers=console.bearer("otto"))
    assert r.status_code == 200 and r.content == unknown
    entries, total = console.users.audit_entries(limit=1)
    assert (
        total == before + 1 and entries[0].action == "media.snapshot.sharp" and entries[0].details["blur"] == "persons"
    )
    assert client.get("/api/v1/events/known/snapshot.jpg", headers=console.bearer("otto")).content == known
    assert console.audit_count() == before + 1  # media made without blur: not a sharp download of blurred media
    shutil.rmtree(snaps)
