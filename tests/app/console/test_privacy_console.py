"""Privacy masks and blur by role on the demo scene, through the real pipeline and the real console app.

The demo's synthetic campus video (`campusguard.data.synth.video`, seed 0: a crowd incident from
3 s) is watched by a `ConsoleRuntime` with a mask over the top 30 % of the frame and
``blur: persons``. The detector returns the video's ground-truth boxes, but only where it can see
them (boxes centred in a masked, flat-black area are not found, as a network would not find
them), and it checks that every frame it is given is already masked.

Targets (issue 25): the masked area is one flat colour in the live camera snapshot, every incident
snapshot served and stored, the clips and the recordings; a viewer's incident snapshot has its
persons blurred (pixel variance inside person boxes far lower than the admin's), an admin's
does not; the admin's sharp downloads are audited.
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import yaml
from fakes_console import CHEAP_HASHER, PASSWORDS, ROLES, ConsoleUnderTest
from fakes_watch import TruthDetector

from campusguard.app.console.identity.users import UserStore
from campusguard.app.console.media_audit import DownloadLog
from campusguard.app.console.runtime import ConsoleRuntime
from campusguard.app.console.server import create_app
from campusguard.app.demo import demo_config
from campusguard.app.media.annotate import recording_segments
from campusguard.app.media.redact import redacted_path, sharp_path
from campusguard.data.synth.classes import COCO_NAMES
from campusguard.detections import Detections

NAMES = dict(enumerate(COCO_NAMES)) if isinstance(COCO_NAMES, (list, tuple)) else dict(COCO_NAMES)
W, H = 640, 360
BAND = 0.3  # the mask: the top 30 % of the frame
BAND_PX = round(BAND * H)
FLAT = 6  # JPEG and H.264 leave a black area within a few levels of black
# JPEG codes colour in 16x16 blocks (4:2:0): the block rows across the mask's edge carry a little colour
# from the scene below it, so the stored snapshots are checked flat down to the last whole block row
JPEG_CLEAN_ROWS = BAND_PX // 16 * 16
# the overlay (header text top-left, box labels above boxes) is drawn on top of the mask in annotated
# views: there the test looks at the part of the band the overlay does not reach in this scene
OVERLAY_FREE = (slice(0, 60), slice(W // 2, W))


class SeeingTruth(TruthDetector):
    """Ground-truth boxes, minus those centred in masked (flat fill) pixels; records unmasked frames."""

    def __init__(self, truth_path: Path) -> None:
        super().__init__(truth_path, NAMES)
        self.frames = 0
        self.unmasked_frames = 0

    def predict_batch(self, images: list[np.ndarray]) -> list[Detections]:
        out = []
        for image, det in zip(images, super().predict_batch(images), strict=True):
            self.frames += 1
            self.unmasked_frames += int(np.any(image[:BAND_PX] != 0))
            if len(det):
                cy = ((det.xyxy[:, 1] + det.xyxy[:, 3]) / 2).astype(int).clip(0, H - 1)
                cx = ((det.xyxy[:, 0] + det.xyxy[:, 2]) / 2).astype(int).clip(0, W - 1)
                det = det[np.any(image[cy, cx] != 0, axis=1)]
            out.append(det)
        return out


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ConsoleUnderTest, SeeingTruth, dict[str, Any]]]:
    from campusguard.data.synth.video import generate_video

    tmp = tmp_path_factory.mktemp("privacy-demo")
    truth = generate_video(0, tmp, seconds=12, size_wh=(W, H), fps=10, name="campus").to_dict()
    data = demo_config(truth, tmp / truth["video"], tmp)
    data["cameras"][0]["privacy"] = {
        "masks": [{"name": "dormitory", "units": "fraction", "polygon": [[0, 0], [1, 0], [1, BAND], [0, BAND]]}],
        "blur": "persons",
    }
    config = tmp / "watch.yaml"
    config.write_text(yaml.safe_dump(data, sort_keys=False))
    detector = SeeingTruth(tmp / "campus.json")
    runtime = ConsoleRuntime(config, detector_factory=lambda *a: detector, out=io.StringIO(), clip_post_s=1.0)
    users = UserStore(tmp / "users.db", password_hasher=CHEAP_HASHER)
    for name, role in ROLES.items():
        users.add_user(name, role, PASSWORDS[name])
    console = ConsoleUnderTest(create_app(runtime, users_db=users), runtime, users, config, tmp)
    runtime.start()
    try:
        assert runtime.service is not None and runtime.service.wait(120), "the pipeline did not finish the video"
        deadline = time.monotonic() + 30  # clips are written once their camera has been idle a moment
        while not list(runtime.clips_dir.glob("*.redacted.mp4")) and time.monotonic() < deadline:
            time.sleep(0.2)
        yield console, detector, truth
    finally:
        runtime.stop()
        users.close()


def _get(c: ConsoleUnderTest, path: str, user: str) -> bytes:
    r = c.client().get(path, headers=c.bearer(user))
    assert r.status_code == 200, (path, user, r.status_code, r.text)
    return bytes(r.content)


def _image(jpeg: bytes) -> np.ndarray:
    image = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    assert image is not None
    return image


def _flat(region: np.ndarray) -> bool:
    return int(np.abs(region.astype(int)).max()) <= FLAT


def test_the_detector_only_ever_got_masked_frames(scene) -> None:
    _, detector, truth = scene
    assert detector.frames == truth["num_frames"] and detector.unmasked_frames == 0


def test_the_live_camera_snapshot_is_masked_for_every_role_and_blurred_for_viewers(scene) -> None:
    console, _, _ = scene
    images = {}
    for user in ("ada", "otto", "vera"):
        image = images[user] = _image(_get(console, "/api/v1/cameras/cam0/snapshot.jpg", user))
        assert image.shape[:2] == (H, W)
        assert _flat(image[OVERLAY_FREE]), user
        assert not _flat(image[BAND_PX + 8 :]), "the rest of the frame is shown"
    latest = console.runtime.hub.latest("cam0")
    assert latest is not None and latest.redact_xyxy is not None
    persons = [b for b in latest.redact_xyxy.tolist() if b[3] - b[1] > 30]
    assert persons, "no person in the last frame"
    sharp_var, viewer_var = _person_variance(images["ada"], persons), _person_variance(images["vera"], persons)
    assert viewer_var < 0.5 * sharp_var, (sharp_var, viewer_var)  # the overlay's box outlines stay sharp
    assert _person_variance(images["otto"], persons) == sharp_var


def _events(console: ConsoleUnderTest) -> list[dict[str, Any]]:
    r = console.client().get("/api/v1/events", headers=console.bearer("ada"))
    return list(r.json()["items"])


def _person_variance(image: np.ndarray, boxes: list[list[float]]) -> float:
    grey = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY).astype(np.float64)
    return float(sum(grey[int(y1) : int(y2), int(x1) : int(x2)].var() for x1, y1, x2, y2 in boxes))


def test_incident_snapshots_are_masked_and_blurred_for_viewers_only(scene) -> None:
    console, _, truth = scene
    events = [e for e in _events(console) if e["snapshot_url"]]
    assert events, "the scene raised no incident with a snapshot"
    before = console.audit_count()
    for event in events:
        sharp = _image(_get(console, event["snapshot_url"], "ada"))
        viewer = _image(_get(console, event["snapshot_url"], "vera"))
        assert _flat(sharp[: JPEG_CLEAN_ROWS]) and _flat(viewer[: JPEG_CLEAN_ROWS])  # raw frames: the whole band
        stored = Path(console.runtime.store.get(event["id"]).snapshot_path)  # type: ignore[union-attr]
        frame_index = int(stored.name.split("_")[1])
        persons = [
            o["xyxy"]
            for o in truth["frames"][frame_index]["objects"]
            if o["class_id"] == 0 and (o["xyxy"][1] + o["xyxy"][3]) / 2 > BAND_PX and o["xyxy"][3] - o["xyxy"][1] > 30
        ]
        assert persons, "no visible person at the incident's frame"
        sharp_var, viewer_var = _person_variance(sharp, persons), _person_variance(viewer, persons)
        assert viewer_var < 0.2 * sharp_var, (sharp_var, viewer_var)
        # the operator sees what the admin sees
        assert _get(console, event["snapshot_url"], "otto") == stored.read_bytes()
    entries, total = console.users.audit_entries(limit=2 * len(events))
    assert total == before + 2 * len(events)  # admin and operator downloads; none for the viewer
    assert {e.action for e in entries} == {"media.snapshot.sharp"} and {e.user for e in entries} == {"ada", "otto"}


def test_every_stored_snapshot_sharp_or_redacted_is_masked(scene) -> None:
    console, _, _ = scene
    files = sorted(console.runtime.snapshots_dir.glob("*.jpg"))
    sharp = [p for p in files if sharp_path(p) == p]
    assert sharp and sorted(redacted_path(p) for p in sharp) == sorted(set(files) - set(sharp))
    for path in files:
        assert _flat(cv2.imread(str(path))[: JPEG_CLEAN_ROWS]), path.name


def _video_frames(path: Path) -> list[np.ndarray]:
    cap = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        frames.append(frame)
    cap.release()
    return frames


def test_recordings_and_clips_are_masked_and_viewers_get_the_blurred_clip(scene, tmp_path: Path) -> None:
    console, _, truth = scene
    segments = recording_segments(console.tmp / "annotated", "cam0")
    frames = [f for s in segments for f in _video_frames(s)]
    assert len(frames) == truth["num_frames"]
    assert all(_flat(f[OVERLAY_FREE]) for f in frames)
    event = next(e for e in _events(console) if e["clip_url"])
    clip = console.runtime.clips.path_for(event["id"])
    for user, expected in (("ada", clip), ("vera", redacted_path(clip))):
        body = _get(console, event["clip_url"], user)
        assert body == expected.read_bytes(), user
        (tmp_path / f"{user}.mp4").write_bytes(body)
        clip_frames = _video_frames(tmp_path / f"{user}.mp4")
        assert clip_frames and all(_flat(f[:60, f.shape[1] // 2 :]) for f in clip_frames)
    entries, total = console.users.audit_entries(limit=1)
    assert entries[0].action == "media.clip.sharp" and entries[0].user == "ada"
    r = console.client().get(event["clip_url"], headers={**console.bearer("ada"), "Range": "bytes=0-"})
    assert r.status_code == 206 and console.users.audit_entries(limit=1)[1] == total + 1  # a player's first range
    r = console.client().get(event["clip_url"], headers={**console.bearer("ada"), "Range": "bytes=1000-"})
    assert r.status_code == 206 and console.users.audit_entries(limit=1)[1] == total + 1  # the rest of that download
    r = console.client().get(event["clip_url"], headers=console.bearer("ada"))
    assert r.status_code == 200 and console.users.audit_entries(limit=1)[1] == total + 2  # a new whole download
    assert json.dumps(entries[0].details) and entries[0].details["blur"] == "persons"


def test_an_operators_ranged_download_of_a_sharp_clip_is_audited_once(scene) -> None:
    """Target 4 (issue 32): ``Range: bytes=1-`` first (all but byte 0) opens an audited download; the
    operator's further ranges of that clip (a player's, or byte 0 to re-assemble the file) belong to it."""
    console, _, _ = scene
    event = next(e for e in _events(console) if e["clip_url"])
    clip = console.runtime.clips.path_for(event["id"]).read_bytes()
    client = console.client()
    ranged = {**console.bearer("otto")}
    before = console.audit_count()
    rest = client.get(event["clip_url"], headers={**ranged, "Range": "bytes=1-"})
    assert rest.status_code == 206 and rest.content == clip[1:]
    head = client.get(event["clip_url"], headers={**ranged, "Range": "bytes=0-0"})
    assert head.status_code == 206 and head.content + rest.content == clip  # re-assembled: still one download
    entries, total = console.users.audit_entries(limit=1)
    assert total == before + 1
    assert (entries[0].user, entries[0].action, entries[0].target) == ("otto", "media.clip.sharp", event["id"])
    assert entries[0].details["ranged"] is True
    # a viewer's ranges are of the blurred copy, never audited as sharp
    r = client.get(event["clip_url"], headers={**console.bearer("vera"), "Range": "bytes=1-"})
    assert r.status_code == 206 and r.content != clip[1:] and console.audit_count() == total


def test_download_log_windows() -> None:
    """Which requests open a download: per user and file, ranges within 10 minutes of the opening belong to it."""
    now = [0.0]
    log = DownloadLog(window_s=600.0, max_entries=3, clock=lambda: now[0])
    assert log.opens_download("otto", "clip:e1", ranged=True)
    assert not log.opens_download("otto", "clip:e1", ranged=True)
    assert log.opens_download("otto", "clip:e1", ranged=False)  # a whole download: always its own
    assert log.opens_download("ada", "clip:e1", ranged=True) and log.opens_download("otto", "snapshot:e1", ranged=True)
    now[0] = 599.0
    assert not log.opens_download("otto", "clip:e1", ranged=True)
    now[0] = 600.0
    assert log.opens_download("otto", "clip:e1", ranged=True)  # ten minutes on: a new download
    for n in range(3):  # bounded: the oldest forgotten first (then a range of it is audited again)
        log.opens_download("vera", f"clip:x{n}", ranged=True)
    assert log.opens_download("otto", "clip:e1", ranged=True)


def test_list_thumbnails_are_small_redacted_and_not_audited(scene) -> None:
    """The incident list shows thumbnails (at most 160 px wide), the blurred copy for every role where the
    camera blurs: opening a page of 50 writes no ``media.snapshot.sharp`` row."""
    console, _, _ = scene
    events = [e for e in _events(console) if e["snapshot_url"]]
    before = console.audit_count()
    for event in events:
        for user in ("ada", "vera"):
            thumb = _image(_get(console, f"/api/v1/events/{event['id']}/thumb.jpg", user))
            assert thumb.shape[1] <= 160
        stored = Path(console.runtime.store.get(event["id"]).snapshot_path)  # type: ignore[union-attr]
        redacted = cv2.resize(
            cv2.imread(str(redacted_path(stored))), (thumb.shape[1], thumb.shape[0]), interpolation=cv2.INTER_AREA
        )
        sharp = cv2.resize(cv2.imread(str(stored)), (thumb.shape[1], thumb.shape[0]), interpolation=cv2.INTER_AREA)
        diff_redacted = np.abs(thumb.astype(int) - redacted.astype(int)).mean()
        assert diff_redacted < np.abs(thumb.astype(int) - sharp.astype(int)).mean() and diff_redacted < 4
    assert console.audit_count() == before


def test_a_privacy_edit_applies_live_through_the_consoles_edit_path(console_video: Path, tmp_path: Path) -> None:
    """What the zones PUT does after validation (`CameraBackend.prepare_zones`, then apply), with a new
    privacy section: the running camera's frames are masked and blurred from then on, no restart."""
    from fakes_console import console_yaml, make_console

    from campusguard.app.config import parse_config

    config = tmp_path / "watch.yaml"
    text = console_yaml(console_video, tmp_path, live=True)
    config.write_text(text)
    c = make_console(config, tmp_path, start=True)
    try:
        runtime = c.runtime
        _until(lambda: runtime.hub.latest("cam1") is not None)
        assert runtime.camera_blur("cam1") == "none" and not runtime.hub.latest("cam1").blurred  # type: ignore[union-attr]
        privacy = "    privacy:\n      blur: faces\n      fill_bgr: [0, 255, 0]\n      masks: [{polygon: [[0, 0], [320, 0], [320, 60], [0, 60]]}]\n"
        edited = text.replace("    zones:\n", privacy + "    zones:\n", 1)
        loaded = parse_config(edited, str(config))
        apply = runtime.cameras.prepare_zones(loaded, edited, "cam1")
        apply()
        runtime.loaded = loaded  # as `ConsoleRuntime.put_zones` does once the file is saved
        _until(lambda: np.all(runtime.hub.latest("cam1").image[:60] == (0, 255, 0)))  # type: ignore[union-attr]
        _until(lambda: runtime.hub.latest("cam1").blurred)  # type: ignore[union-attr]
        assert runtime.camera_blur("cam1") == "faces"
        frame = runtime.hub.latest("cam1")
        assert frame is not None and not np.any(
            np.all(frame.image[61:] == (0, 255, 0), axis=2)
        )  # boundary row 60 is masked
    finally:
        runtime.stop()
        c.users.close()


def _until(condition: Any, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_viewer_is_offered_no_media_url_where_only_the_sharp_file_exists(scene) -> None:
    """Media written before blur was switched on has no redacted variant: a viewer's event JSON has
    no URL for it (no broken image) and the file answers 404; an admin still gets it."""
    console, _, _ = scene
    event = next(e for e in _events(console) if e["snapshot_url"])
    stored = Path(console.runtime.store.get(event["id"]).snapshot_path)  # type: ignore[union-attr]
    variant = redacted_path(stored)
    aside = variant.with_name(variant.name + ".aside")
    variant.rename(aside)
    try:
        client = console.client()
        as_viewer = client.get(f"/api/v1/events/{event['id']}", headers=console.bearer("vera")).json()
        as_admin = client.get(f"/api/v1/events/{event['id']}", headers=console.bearer("ada")).json()
        assert as_viewer["snapshot_url"] is None and as_admin["snapshot_url"] == event["snapshot_url"]
        listed = client.get("/api/v1/events?limit=500", headers=console.bearer("vera")).json()["items"]
        assert next(e for e in listed if e["id"] == event["id"])["snapshot_url"] is None
        # withheld, not missing: the event page says so instead of waiting for a file
        assert as_viewer["snapshot_withheld"] is True and as_admin["snapshot_withheld"] is False
        r = client.get(event["snapshot_url"], headers=console.bearer("vera"))
        assert r.status_code == 404
        assert client.get(f"/api/v1/events/{event['id']}/thumb.jpg", headers=console.bearer("ada")).status_code == 404
    finally:
        aside.rename(variant)
