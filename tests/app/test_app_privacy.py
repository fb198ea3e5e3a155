"""Privacy masks and blur in the watch pipeline: config checks, masks before detection, live edits.

Runs the real `WatchService` on the synthetic scene of `fakes_watch` (a red 'person' walking
right, a parked blue 'car') with `BlobDetector`, a real colour-blob detector that sees the
pixels it is given: a masked person is not detected.
"""

from __future__ import annotations

import io
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fakes_watch import BlobDetector, scene_config, write_scene  # noqa: E402

from campusguard.app.config import parse_config  # noqa: E402
from campusguard.app.media.live import LiveFrame, render_live_frame  # noqa: E402
from campusguard.app.media.redact import redacted_path, sharp_path  # noqa: E402
from campusguard.app.service import WatchService  # noqa: E402
from campusguard.detections import Detections  # noqa: E402
from campusguard.errors import ConfigError  # noqa: E402

CAMERA = """\
cameras:
  - id: c
    source: x.mp4
{resolution}    privacy:
      masks:
        - name: windows
          units: {mask_units}
          polygon: {mask}
    zones:
      - name: inner
        units: {zone_units}
        polygon: {zone}
    lines:
      - name: gate
        points: [[10, 150], [150, 150]]
"""


def _camera(zone: str, zone_units: str = "pixels", mask: str = "[[0, 0], [320, 0], [320, 100], [0, 100]]",
            mask_units: str = "pixels", resolution: str = "") -> str:  # fmt: skip
    return CAMERA.format(zone=zone, zone_units=zone_units, mask=mask, mask_units=mask_units, resolution=resolution)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            _camera("[[10, 10], [100, 10], [100, 90]]"),
            r"c.yaml:12: cameras\[0\].zones\[0\].polygon: zone 'inner' lies inside privacy mask 'windows'",
        ),
        (  # fractions on both sides: compared without a frame size
            _camera(
                "[[0.1, 0.1], [0.5, 0.1], [0.5, 0.2]]", "fraction", "[[0, 0], [1, 0], [1, 0.5], [0, 0.5]]", "fraction"
            ),
            r"c.yaml:12: cameras\[0\].zones\[0\].polygon: zone 'inner' lies inside",
        ),
        (  # mixed units: the declared resolution places them
            _camera(
                "[[10, 10], [100, 10], [100, 90]]",
                mask="[[0, 0], [1, 0], [1, 0.6], [0, 0.6]]",
                mask_units="fraction",
                resolution="    resolution_wh: [320, 180]\n",
            ),
            r"c.yaml:13: cameras\[0\].zones\[0\].polygon: zone 'inner' lies inside privacy mask 'windows'.*declared resolution",
        ),
        (
            _camera("[[10, 50], [100, 50], [100, 170]]", mask="[[0, 100], [320, 100], [320, 180], [0, 180]]"),
            r"c.yaml:15: cameras\[0\].lines\[0\].points: line 'gate' lies inside privacy mask 'windows'",
        ),
    ],
    ids=["pixels", "fractions", "mixed-with-resolution", "line"],
)
def test_a_zone_or_line_inside_a_mask_is_a_config_error_naming_its_line(text: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        parse_config(text, "c.yaml")


def test_shapes_partly_masked_or_in_other_units_are_accepted_until_the_frame_is_known() -> None:
    parse_config(_camera("[[10, 50], [100, 50], [100, 150]]"), "c.yaml")  # partly visible: fine
    mixed = _camera(
        "[[10, 10], [100, 10], [100, 90]]", mask="[[0, 0], [1, 0], [1, 0.5], [0, 0.5]]", mask_units="fraction"
    )
    loaded = parse_config(mixed, "c.yaml")  # no frame size yet: checked against the first frame
    loaded.check_frame_size(0, (320, 160))  # the mask covers y < 80: the zone reaches below it
    with pytest.raises(
        ConfigError, match=r"c.yaml:12: .*zone 'inner' lies inside privacy mask 'windows'.*\(camera 'c'\)"
    ):
        loaded.check_frame_size(0, (320, 200))  # y < 100: the zone is hidden


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_scene(tmp_path_factory.mktemp("video") / "scene.mp4")


class RecordingDetector(BlobDetector):
    """A `BlobDetector` that keeps the frames it was given (thread-safe copies of the latest few)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[np.ndarray] = []
        self.lock = threading.Lock()

    def predict_batch(self, images: list[np.ndarray]) -> list[Detections]:
        with self.lock:
            self.seen.extend(im.copy() for im in images)
            del self.seen[:-20]
        return super().predict_batch(images)


EAST_MASK = "    privacy:\n      masks:\n        - {name: east, units: fraction, polygon: [[0.5, 0], [1, 0], [1, 1], [0.5, 1]]}\n"


def test_masks_are_filled_before_detection_and_a_new_mask_applies_live(scene: Path, tmp_path: Path) -> None:
    text = scene_config(scene, tmp_path).replace(
        f"source: {scene}", f"source: {scene}\n    loop: true\n    realtime: true"
    )
    text = text.replace("      - name: east\n        polygon: [[160, 0], [320, 0], [320, 180], [160, 180]]\n", "")
    text = text.replace(
        "      - kind: intrusion\n        zone: east\n        classes: [person]\n        min_seconds: 1.0\n", ""
    )
    detector = RecordingDetector()
    frames: list[LiveFrame] = []
    service = WatchService(
        parse_config(text, "watch.yaml"),
        detector_factory=lambda *a: detector,
        out=io.StringIO(),
        on_frame=frames.append,
    )
    service.start()
    try:
        _wait(lambda: any(_person_x(f) > 170 for f in frames), "the person never reached the east half unmasked")
        assert not np.all(frames[-1].image[:, 170:] == 0)
        # the east half masked through the live-edit path (as the console's zones PUT does)
        edited = parse_config(text.replace("    zones:\n", EAST_MASK + "    zones:\n", 1), "watch.yaml")
        service.apply_camera_parts(edited, "cam1", service.build_camera_parts(edited, "cam1"))
        mark = len(frames)
        _wait(lambda: len(frames) > mark + 40, "no frames after the edit")
        after = frames[mark + 5 :]
        assert all(np.all(f.image[:, 160:] == 0) for f in after), "a frame after the edit shows the masked half"
        assert all(_person_x(f) < 160 for f in after), "a person was detected inside the mask"
        with detector.lock:
            assert detector.seen and all(np.all(im[:, 160:] == 0) for im in detector.seen[-10:])
        assert np.all(render_live_frame(after[-1])[:, 200:, 2] < 240)  # no red person drawn from the masked side
    finally:
        service.stop()
        service.wait(20)
        service.finish()


def _person_x(frame: LiveFrame) -> float:
    """Right edge of the rightmost person box (−1 when none)."""
    d = frame.detections
    boxes = d.xyxy[d.class_id == 0]
    return float(boxes[:, 2].max()) if len(boxes) else -1.0


def _wait(condition: Callable[[], bool], message: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, message
        time.sleep(0.05)


def test_blur_persons_writes_a_redacted_snapshot_next_to_the_sharp_one(scene: Path, tmp_path: Path) -> None:
    text = scene_config(scene, tmp_path).replace("    zones:\n", "    privacy: {blur: persons}\n    zones:\n", 1)
    frames: list[LiveFrame] = []
    service = WatchService(
        parse_config(text, "watch.yaml"),
        detector_factory=lambda *a: BlobDetector(),
        out=io.StringIO(),
        on_frame=frames.append,
    )
    assert service.run()
    snaps = sorted((tmp_path / "snaps").glob("*.jpg"))
    sharp = [p for p in snaps if sharp_path(p) == p]
    assert sharp and {redacted_path(p) for p in sharp} == set(snaps) - set(sharp)
    assert all(f.blurred for f in frames)
    with_person = next(f for f in frames if _person_x(f) > 0)
    box = with_person.redact_xyxy
    assert box is not None and len(box) == 1  # the car is not a person
    x1, y1, x2, y2 = np.round(box[0]).astype(int)
    sharp_img, blurred_img = render_live_frame(with_person), render_live_frame(with_person, redacted=True)
    assert np.array_equal(sharp_img[:, x2 + 20 :], blurred_img[:, x2 + 20 :])  # nothing else changes
    edge = np.abs(
        sharp_img[y1 - 2 : y2 + 3, x1 - 2 : x2 + 3].astype(int) - blurred_img[y1 - 2 : y2 + 3, x1 - 2 : x2 + 3]
    )
    assert edge.max() > 60  # the person's outline is smeared into the background


def test_scan_masks_recordings_too(scene: Path, tmp_path: Path) -> None:
    """`campusguard scan` runs recordings through the same readers: a person behind a mask raises nothing."""
    from fakes_watch import blob_detector_factory
    from rich.console import Console

    from campusguard.app.events import read_events
    from campusguard.app.scan import LocalExecutor, run_scan

    kinds = {}
    for name, privacy in (
        ("open", ""),
        ("masked", "    privacy: {masks: [{polygon: [[170, 0], [320, 0], [320, 180], [170, 180]]}]}\n"),
    ):
        out = tmp_path / name
        out.mkdir()
        text = scene_config(scene, out).replace(f"  annotated_video_dir: {out / 'video'}\n", "")
        run_scan(
            parse_config(text.replace("    zones:\n", privacy + "    zones:\n", 1), "scan.yaml"),
            [str(scene)],
            LocalExecutor(1),
            detector_factory=blob_detector_factory,
            out=io.StringIO(),
            console=Console(file=io.StringIO()),
        )
        kinds[name] = sorted(e.rule_kind for e in read_events(out / "events.db"))
    assert kinds["open"] == ["fire_lane", "intrusion"]
    assert kinds["masked"] == ["fire_lane"]  # the person is hidden before they have been in the east zone 1 s


def test_the_live_hub_encodes_the_redacted_view_only_for_redacted_clients() -> None:
    from campusguard.app.media.live import FrameHub

    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (120, 160, 3), dtype=np.uint8)
    hub = FrameHub(["a", "b"], max_fps=100)
    base = {"index": 1, "timestamp_s": 0.0, "image": image, "detections": Detections.empty(), "names": {0: "person"}}
    hub.publish(LiveFrame(camera_id="a", resolution_wh=(160, 120), **base))
    hub.publish(
        LiveFrame(
            camera_id="b", resolution_wh=(160, 120), redact_xyxy=np.array([[40, 20, 100, 110]], np.float32), **base
        )
    )
    try:
        assert hub.snapshot_jpeg("a", redacted=True) == hub.snapshot_jpeg("a") and hub.encoded_frames("a") == 1
        sharp, redacted = hub.snapshot_jpeg("b"), hub.snapshot_jpeg("b", redacted=True)
        assert sharp != redacted and hub.encoded_frames("b") == 2
        with hub.open_viewer("b", redacted=True) as viewer, hub.open_viewer("b") as plain:
            assert viewer.get(5.0) == redacted and plain.get(5.0) == sharp
        assert hub.encoded_frames("b") == 2  # once per frame and variant, whatever the number of clients
    finally:
        hub.close()


def test_a_camera_group_masks_and_keeps_redacted_media_for_the_console(tmp_path: Path) -> None:
    """What `serve --ray` copies from a camera group: the redacted snapshot and clip next to the sharp ones."""
    sys.path.insert(0, str(Path(__file__).parent / "cluster"))
    from fakes_cluster import cameras_config, make_detector_factory, write_walks

    from campusguard.app.cluster.group import CameraGroup, MediaOptions

    video = write_walks(tmp_path / "v0.avi", 60)
    privacy = "    privacy:\n      blur: persons\n      masks: [{polygon: [[0, 0], [320, 0], [320, 40], [0, 40]]}]\n"
    text = cameras_config([video], tmp_path, cameras_per_actor=1).replace("    zones:\n", privacy + "    zones:\n", 1)
    group = CameraGroup(
        parse_config(text, "c.yaml"),
        ["cam0"],
        detector_factory=lambda loaded: make_detector_factory(loaded, 0.0),
        media=MediaOptions(0.5, 0.5),
    )
    try:
        deadline = time.monotonic() + 60
        while not group.pull().finished:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        starts = [e for _, e in group.outbox.pending(100)[0] if e.phase == "start"]
        assert starts
        eid = starts[0].event_id
        sharp, redacted = group.media("snapshot", eid), group.media("snapshot_redacted", eid)
        assert sharp is not None and redacted is not None and sharp != redacted
        for jpeg in (sharp, redacted):
            image = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
            assert int(image[:36].max()) <= 6  # the mask, in both
        while (clip := group.media("clip_redacted", eid)) is None:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert clip[4:8] == b"ftyp" and clip != group.media("clip", eid)
        got = group.frame_jpeg("cam0")
        latest = group.hub.latest_jpeg("cam0", redacted=True)
        assert got is not None and latest is not None and got[1] == latest[1]  # the console's one variant
    finally:
        group.discard_media()
