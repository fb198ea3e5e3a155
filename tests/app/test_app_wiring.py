"""`build_camera`: config sections become the kit's zones and lines, a tracker and the rules."""

from __future__ import annotations

import numpy as np
import pytest

from campusguard.app.config import parse_config
from campusguard.app.engine.wiring import build_camera
from campusguard.app.rules import CrowdRule, IntrusionRule, LineCrossingRule
from campusguard.errors import ConfigError

CONFIG = """\
cameras:
  - id: gate
    zones:
      - name: door
        polygon: [[10, 10], [200, 10], [200, 200], [10, 200]]
        anchor: center
      - name: plaza
        units: fraction
        polygon: [[0.5, 0.5], [1.0, 0.5], [1.0, 1.0], [0.5, 1.0]]
    lines:
      - name: entry
        units: fraction
        points: [[0, 0.5], [1, 0.5]]
    rules:
      - kind: intrusion
        zone: door
      - kind: crowd
        zone: plaza
        classes: [person, car]
      - kind: line_crossing
        line: entry
        hysteresis_px: 4
"""
NAMES = {0: "person", 2: "car"}


def test_build_camera_maps_every_section() -> None:
    parts = build_camera(parse_config(CONFIG, "c.yaml"), 0, NAMES, (640, 360), 10.0)
    intrusion, crowd, crossing, health = parts.rules.rules  # the rules, then the camera's health (on by default)
    assert health.kind == "camera_health" and health.live  # the default source is webcam 0: live, with an offline clock
    assert isinstance(intrusion, IntrusionRule) and intrusion.presence.anchor == "center"  # the zone's anchor
    assert isinstance(crowd, CrowdRule) and crowd.presence.anchor == "bottom_center"
    assert crowd.class_ids == (0, 2) and crowd.zone.polygon_xy.tolist()[0] == [320.0, 180.0]
    assert isinstance(crossing, LineCrossingRule) and crossing.line.hysteresis_px == 4.0
    assert [name for name, _ in parts.geometry.zones] == ["door", "plaza"]
    ((name, end_points),) = parts.geometry.lines
    assert name == "entry" and end_points.dtype == np.float32
    np.testing.assert_allclose(end_points, [[0, 180], [640, 180]])


def test_build_camera_names_the_line_of_a_zone_that_leaves_the_frame() -> None:
    with pytest.raises(ConfigError, match=r"c.yaml:5: cameras\[0\].zones\[0\].polygon: .*outside the 160x120 frame"):
        build_camera(parse_config(CONFIG, "c.yaml"), 0, NAMES, (160, 120), 10.0)
