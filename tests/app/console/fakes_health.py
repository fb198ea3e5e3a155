"""Camera health console tests' cameras: live HTTP cameras on loopback (`http_camera.HttpCamera`) whose
lens a test can cover or turn away, one camera address that refuses connections from the start (offline), and one
camera with its health check off. Short learning and minimum times keep the tests to seconds.
Import it as ``from fakes_health import ...``."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1]))
from http_camera import HttpCamera, free_port  # noqa: E402

from campusguard.data.synth.video import SynthVideo  # noqa: E402
from campusguard.data.synth.view_effects import EffectKind, ViewEffect, apply_view_effects  # noqa: E402

SIZE_WH = (320, 180)
GATE_ZONES = ("door", "path")


class ViewScene:
    """A textured synthetic scene looped at 10 fps; ``effect`` (the generator's view effects: ``"cover"``,
    ``"turn"``, ...; None for none) changes what the camera sees from now on, with sensor noise kept."""

    def __init__(self, seed: int = 5) -> None:
        scene = SynthVideo(seed, SIZE_WH, seconds=10, fps=10, idle_fraction=0.5)
        self.frames = [scene.frame(i)[0] for i in range(50)]
        self.effect: EffectKind | None = None
        self.seed = seed
        self._rng = np.random.default_rng(seed)

    def __call__(self, t: float) -> np.ndarray:
        index = int(t * 10) % len(self.frames)
        frame = self.frames[index]
        if self.effect is None:
            return frame
        changed = apply_view_effects(frame.copy(), [ViewEffect(self.effect, 0.0, 1e9)], 1.0, self.seed, index)
        noise = self._rng.normal(0, 2, changed.shape)
        return np.clip(changed.astype(np.float32) + noise, 0, 255).astype(np.uint8)


@dataclass
class HealthCameras:
    """``gate`` (live, coverable, zones door and path), ``yard`` (refuses connections: offline from the
    start) and ``lot`` (live, its health check off)."""

    gate_scene: ViewScene
    gate: HttpCamera
    lot: HttpCamera
    yard_url: str

    def close(self) -> None:
        self.gate.close()
        self.lot.close()


def health_cameras() -> HealthCameras:
    scene = ViewScene()
    other = ViewScene(seed=9)
    return HealthCameras(
        scene, HttpCamera(scene, fps=10), HttpCamera(other, fps=10), f"http://127.0.0.1:{free_port()}/video.mjpg"
    )


def health_yaml(cams: HealthCameras, tmp: Path) -> str:
    """A console config of the three cameras: health learns for 2 s, samples every 0.5 s, a cover, a turn
    and an outage are incidents after 2 s, and end 1 s after the camera sees again."""
    return f"""\
cameras:
  - id: gate
    source: {cams.gate.url}
    zones:
      - name: door
        polygon: [[0, 0], [160, 0], [160, 180], [0, 180]]
      - name: path
        polygon: [[160, 90], [320, 90], [320, 180], [160, 180]]
    rules:
      - kind: intrusion
        zone: door
        classes: [person]
  - id: yard
    source: {cams.yard_url}
    reconnect: {{initial_s: 0.5, max_s: 2}}
  - id: lot
    source: {cams.lot.url}
    health: {{enabled: false}}
health:
  learn_s: 2
  sample_s: 0.5
  end_s: 1
  covered: {{min_s: 2}}
  moved: {{min_s: 2}}
  offline: {{min_s: 2}}
storage:
  sqlite: {tmp / "events.db"}
outputs:
  snapshots_dir: {tmp / "snaps"}
  metrics_interval_s: 0
"""


def wait_for(predicate: Callable[[], Any], timeout_s: float = 30.0, what: str = "the condition") -> Any:
    """``predicate()``'s first truthy value, polled every 0.2 s; fails the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def camera_health(client: Any, headers: dict[str, str]) -> dict[str, Any]:
    """Camera name -> its ``health`` in ``GET /api/v1/cameras``."""
    response = client.get("/api/v1/cameras", headers=headers)
    assert response.status_code == 200, response.text
    return {c["name"]: c["health"] for c in response.json()}


def config_with_health(tmp: Path) -> Iterator[tuple[HealthCameras, Path]]:
    """The cameras and their config file in ``tmp`` (for fixtures: ``yield from``); cameras closed after."""
    cams = health_cameras()
    config = tmp / "watch.yaml"
    config.write_text(health_yaml(cams, tmp))
    try:
        yield cams, config
    finally:
        cams.close()
