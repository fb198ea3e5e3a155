"""The live view hub: a reference swap per frame, JPEG encoding only while someone watches."""

from __future__ import annotations

import io
import sys
import threading
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fakes_watch import BlobDetector, scene_config, write_scene  # noqa: E402

from campusguard.app.config import parse_config  # noqa: E402
from campusguard.app.media.live import FrameHub, LiveFrame, PulledFrameHub, render_live_frame  # noqa: E402
from campusguard.app.service import WatchService  # noqa: E402
from campusguard.detections import Detections  # noqa: E402
from campusguard.errors import CampusGuardError  # noqa: E402


def live_frame(index: int, camera: str = "cam1", wh: tuple[int, int] = (64, 48)) -> LiveFrame:
    image = np.full((wh[1], wh[0], 3), index % 255, np.uint8)
    return LiveFrame(camera, index, index / 10, image, Detections.empty(), {0: "person"}, wh)


def decode(jpeg: bytes) -> np.ndarray:
    image = cv2.imdecode(np.frombuffer(jpeg, np.uint8), cv2.IMREAD_COLOR)
    assert image is not None
    return image


def test_publishing_without_viewers_encodes_nothing_and_copies_nothing() -> None:
    hub = FrameHub(["cam1"])
    frame = live_frame(0)
    hub.publish(frame)
    assert hub.latest("cam1") is frame and hub.latest("cam1").image is frame.image  # type: ignore[union-attr]
    assert hub.encoded_frames("cam1") == 0


def test_snapshot_is_encoded_on_request_and_cached_per_frame() -> None:
    hub = FrameHub(["cam1"])
    assert hub.snapshot_jpeg("cam1") is None  # no frame yet
    hub.publish(live_frame(1))
    first = hub.snapshot_jpeg("cam1")
    assert first is not None and decode(first).shape == (48, 64, 3)
    assert hub.snapshot_jpeg("cam1") is first and hub.encoded_frames("cam1") == 1
    hub.publish(live_frame(2))
    assert hub.snapshot_jpeg("cam1") != first and hub.encoded_frames("cam1") == 2
    with pytest.raises(KeyError):
        hub.snapshot_jpeg("nope")
    with pytest.raises(KeyError):
        hub.open_viewer("nope")


def test_render_draws_the_overlay_on_a_copy_at_the_reference_size() -> None:
    frame = LiveFrame(
        "cam1",
        0,
        0.0,
        np.zeros((24, 32, 3), np.uint8),
        Detections.empty(),
        {},
        (64, 48),
        zones=[("z", np.array([[5, 5], [60, 5], [60, 40]], np.float32))],
        header="cam1",
    )
    out = render_live_frame(frame)
    assert out.shape == (48, 64, 3) and out.any()
    assert not frame.image.any()  # the shared reader image is never drawn on


def test_viewers_get_new_frames_and_a_slow_viewer_only_loses_old_ones() -> None:
    hub = FrameHub(["cam1"], max_fps=200)
    fast, slow = hub.open_viewer("cam1", maxsize=2), hub.open_viewer("cam1", maxsize=2)
    seen: list[int] = []

    def watch() -> None:
        while (jpeg := fast.get(1.0)) is not None:
            seen.append(int(decode(jpeg)[0, 0, 0]))

    t = threading.Thread(target=watch)
    t.start()
    t0 = time.monotonic()
    for i in range(1, 101):
        hub.publish(live_frame(i))
        time.sleep(0.01)
    publish_s = time.monotonic() - t0
    time.sleep(0.2)
    fast.close()
    t.join(5)
    assert publish_s < 1.0 + 2.0  # 100 x 10 ms of sleep plus slack: publishing never waited on a viewer
    # in order, and the last one is the newest frame (JPEG may shift a grey level by 1)
    assert len(seen) >= 10 and seen == sorted(seen) and abs(seen[-1] - 100) <= 1
    assert len(slow) == 2 and slow.dropped > 0  # never read: kept only its two newest frames
    older, newest = (int(decode(slow.get(0) or b"")[0, 0, 0]) for _ in range(2))
    assert older < newest and abs(newest - 100) <= 1
    slow.close()
    assert hub.viewer_count("cam1") == 0


def test_a_new_viewer_of_a_finished_stream_gets_its_last_frame() -> None:
    hub = FrameHub(["cam1"])
    hub.publish(live_frame(7))
    with hub.open_viewer("cam1") as viewer:
        jpeg = viewer.get(2.0)
    assert jpeg is not None and abs(int(decode(jpeg)[0, 0, 0]) - 7) <= 1
    hub.close()


def test_the_pipeline_feeds_the_hub_every_processed_frame(tmp_path: Path) -> None:
    video = write_scene(tmp_path / "scene.mp4")
    hub = FrameHub(["cam1"])
    indices: list[int] = []

    def on_frame(frame: LiveFrame) -> None:
        indices.append(frame.index)
        hub.publish(frame)

    service = WatchService(
        parse_config(scene_config(video, tmp_path), "w.yaml"),
        detector_factory=lambda *a: BlobDetector(),
        out=io.StringIO(),
        on_frame=on_frame,
    )
    assert service.run()
    assert indices == list(range(60))
    assert hub.encoded_frames("cam1") == 0  # nobody watched
    last = hub.latest("cam1")
    assert last is not None and last.index == 59 and last.zones and last.detections.tracker_id is not None
    jpeg = hub.snapshot_jpeg("cam1")
    assert jpeg is not None and decode(jpeg).shape == (180, 320, 3)


class Holder:
    """The far side of a `PulledFrameHub`: a real `FrameHub` answering pulls as a camera group does."""

    def __init__(self) -> None:
        self.hub = FrameHub(["cam1"])
        self.calls = 0
        self.down = False

    def fetch(self, camera: str, known: object) -> tuple[object, bytes | None] | None:
        self.calls += 1
        if self.down:
            raise CampusGuardError("restarting")
        got = self.hub.latest_jpeg(camera)
        if got is None:
            return None
        return got[0], None if got[0] == known else got[1]


def test_a_pulled_hub_pulls_only_for_viewers_and_survives_a_holder_that_is_down() -> None:
    holder = Holder()
    hub = PulledFrameHub(["cam1"], holder.fetch, max_fps=20)
    holder.hub.publish(live_frame(1))
    time.sleep(0.2)
    assert holder.calls == 0  # nobody watches: nothing is pulled
    first = hub.snapshot_jpeg("cam1")
    assert first is not None and decode(first).shape == (48, 64, 3) and holder.calls == 1
    assert hub.snapshot_jpeg("cam1") is first and holder.calls == 1  # pulled within 1 / max_fps: cached
    viewer = hub.open_viewer("cam1")
    try:
        assert viewer.get(2.0) == first  # a newcomer gets the current frame
        holder.hub.publish(live_frame(2))
        second = viewer.get(2.0)
        assert second is not None and second != first
        holder.down = True  # the holder restarts: no frame, no error, the view stays open
        calls = holder.calls
        assert viewer.get(0.3) is None and not viewer.closed
        assert 2 <= holder.calls - calls <= 10  # about max_fps pulls a second, no busy loop
        with pytest.raises(CampusGuardError):
            time.sleep(0.06)
            hub.snapshot_jpeg("cam1")
        holder.down = False
        holder.hub.publish(live_frame(3))
        third = viewer.get(2.0)
        assert third is not None and third not in (first, second)
    finally:
        viewer.close()
        hub.close()
    with pytest.raises(TypeError):
        hub.publish(live_frame(4))
