"""The watch config: valid files load, bad ones give one line naming file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from campusguard.app.config import (
    StorageConfig,
    WatchConfig,
    class_ids,
    config_schema,
    load_config,
    parse_config,
    polygon_problem,
    source_kind,
)
from campusguard.app.rules.zone_rules import CrowdRuleConfig
from campusguard.errors import ConfigError
from campusguard.zones import LineZone, PolygonZone, line_problem, units_problem

GOOD = """\
detector:
  conf: 0.3
cameras:
  - id: gate
    source: gate.mp4
    resolution_wh: [640, 360]
    zones:
      - name: restricted
        polygon: [[10, 10], [200, 10], [200, 200], [10, 200]]
      - name: plaza
        units: fraction
        polygon: [[0.5, 0.5], [1.0, 0.5], [1.0, 1.0], [0.5, 1.0]]
    lines:
      - name: entry
        points: [[0, 300], [640, 300]]
    rules:
      - kind: intrusion
        zone: restricted
        classes: [person]
      - kind: crowd
        zone: plaza
        min_count: 4
        min_seconds: 3
      - kind: line_crossing
        line: entry
        direction: in
alerts:
  - kind: stdout
  - kind: jsonl
    path: events.jsonl
storage:
  sqlite: events.db
"""


def test_good_config_loads_with_defaults_filled() -> None:
    loaded = parse_config(GOOD, "c.yaml")
    cfg = loaded.config
    assert cfg.detector.conf == 0.3 and cfg.detector.iou == 0.7
    cam = cfg.cameras[0]
    assert [z.name for z in cam.zones] == ["restricted", "plaza"]
    assert isinstance(cam.rules[1], CrowdRuleConfig) and cam.rules[1].min_count == 4
    assert cam.rules[0].display_name() == "intrusion:restricted"
    assert cam.zones[1].build((640, 360)).polygon_xy[0].tolist() == [320.0, 180.0]
    assert not cam.is_realtime()  # files are processed frame by frame unless asked otherwise


def test_empty_file_is_a_default_config() -> None:
    assert parse_config("", "c.yaml").config == WatchConfig()


def test_load_config_reads_a_file(tmp_path: Path) -> None:
    p = tmp_path / "watch.yaml"
    p.write_text(GOOD)
    assert load_config(p).config.cameras[0].id == "gate"
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.yaml")


BAD = [
    # (replace old, with new, expected line, expected fragment)
    ("  conf: 0.3", "  conf: [0.3", 3, "invalid YAML"),
    ("  conf: 0.3", "  conf: 0.3\n  colour: red", 3, "detector.colour: unknown key 'colour'"),
    ("  conf: 0.3", "  conf: 1.5", 2, "detector.conf: Input should be less than or equal to 1"),
    (
        "[[10, 10], [200, 10], [200, 200], [10, 200]]",
        "[[10, 10], [200, 200], [200, 10], [10, 200]]",
        9,
        "self-intersecting",
    ),
    ("[[10, 10], [200, 10], [200, 200], [10, 200]]", "[[10, 10], [100, 10], [200, 10]]", 9, "degenerate"),
    ("[[10, 10], [200, 10], [200, 200], [10, 200]]", "[[10, 10], [20, 20]]", 9, "at least 3 points"),
    (
        "[[10, 10], [200, 10], [200, 200], [10, 200]]",
        "[[10, 10], [900, 10], [900, 200], [10, 200]]",
        9,
        "outside the 640x360 frame",
    ),
    (
        "[[0.5, 0.5], [1.0, 0.5]",
        "[[0.5, 0.5], [1.5, 0.5]",
        10,
        "zones[1]: coordinates in units 'fraction' must be in 0..1",
    ),
    ("        zone: plaza", "        zone: lawn", 21, "rules[1].zone: rule names unknown zone 'lawn'"),
    ("        line: entry", "        line: exit", 25, "unknown line 'exit'"),
    ("      - kind: crowd", "      - kind: riot", 20, "unknown rule kind 'riot'"),
    ("        min_count: 4", "        min_count: 4\n        max_count: 9", 23, "rules[1].max_count: unknown key"),
    ("  - kind: jsonl\n    path: events.jsonl", "  - kind: jsonl", 29, "needs `path`"),
    ("  - id: gate", "  - id: gate\n    source2: x", 5, "cameras[0].source2: unknown key"),
    ("    source: gate.mp4", "    source: {file: gate.mp4}", 5, "cameras[0].source: invalid value"),
]


@pytest.mark.parametrize(("old", "new", "line", "fragment"), BAD)
def test_bad_config_names_file_line_and_field(old: str, new: str, line: int, fragment: str) -> None:
    assert old in GOOD
    with pytest.raises(ConfigError) as info:
        parse_config(GOOD.replace(old, new), "c.yaml")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"c.yaml:{line}:"), message
    assert fragment in message


def test_duplicate_camera_id_is_rejected() -> None:
    text = "cameras:\n  - id: a\n    source: x.mp4\n  - id: a\n    source: y.mp4\n"
    with pytest.raises(ConfigError, match=r"c.yaml:4: cameras\[1\].id: camera id 'a' is already used"):
        parse_config(text, "c.yaml")


def test_top_level_must_be_a_mapping() -> None:
    with pytest.raises(ConfigError, match="must be a mapping"):
        parse_config("- a\n- b\n", "c.yaml")


def test_start_up_checks_name_the_line() -> None:
    text = GOOD.replace("    resolution_wh: [640, 360]\n", "")
    loaded = parse_config(text, "c.yaml")
    loaded.check_frame_size(0, (640, 360))  # fits
    with pytest.raises(ConfigError, match=r"c.yaml:8: cameras\[0\].zones\[0\].polygon: .*outside the 160x120 frame"):
        loaded.check_frame_size(0, (160, 120))
    loaded.check_class_names(0, {0: "person", 1: "car"})
    with pytest.raises(ConfigError, match=r"c.yaml:18: cameras\[0\].rules\[0\].classes\[0\]: unknown class 'person'"):
        loaded.check_class_names(0, {0: "car"})
    assert "c.yaml:5: cameras[0].source" in loaded.where(("cameras", 0, "source"))


@pytest.mark.parametrize(
    ("shape", "problem"),
    [
        (
            "zones:\n      - polygon: [[0, 0], [9, 9], [9, 0], [0, 9]]",
            polygon_problem([(0, 0), (9, 9), (9, 0), (0, 9)]),
        ),
        ("zones:\n      - polygon: [[0, 0], [5, 5], [9, 9]]", polygon_problem([(0, 0), (5, 5), (9, 9)])),
        ("lines:\n      - points: [[3, 4], [3, 4]]", line_problem([(3, 4), (3, 4)])),
        (
            "lines:\n      - units: fraction\n        points: [[0, 0.5], [1.2, 0.5]]",
            units_problem([(0, 0.5), (1.2, 0.5)], "fraction"),
        ),
    ],
)
def test_zones_and_lines_are_checked_by_the_kit(shape: str, problem: str | None) -> None:
    assert problem  # the kit finds a problem, and the config reports that very message
    with pytest.raises(ConfigError) as info:
        parse_config(f"cameras:\n  - id: a\n    {shape}\n", "c.yaml")
    assert str(info.value).endswith(problem)


def test_config_zones_and_lines_build_the_kit_objects() -> None:
    cam = parse_config(GOOD, "c.yaml").config.cameras[0]
    zone = cam.zones[1].build((640, 360))
    assert isinstance(zone, PolygonZone) and zone.name == "plaza" and zone.area_px == pytest.approx(320 * 180)
    line = cam.lines[0].build((640, 360), hysteresis_px=2.0)
    assert isinstance(line, LineZone) and line.hysteresis_px == 2.0
    assert line.start_xy.tolist() == [0.0, 300.0] and line.end_xy.tolist() == [640.0, 300.0]


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        (0, "webcam"),
        ("2", "webcam"),
        ("rtsp://cam/1", "url"),
        ("HTTP://x:8080/s", "url"),
        ("v.mp4", "path"),
        ("frames/", "path"),
    ],
)
def test_source_kind(source: int | str, kind: str) -> None:
    assert source_kind(source) == kind


def test_class_ids_resolves_names_and_ids() -> None:
    assert class_ids(["person", 2, "unicorn", 9], {0: "person", 2: "car"}) == [0, 2]


def test_schema_is_valid_json_schema_and_validates_the_example() -> None:
    schema = json.loads(config_schema())
    jsonschema.Draft202012Validator.check_schema(schema)
    import yaml

    jsonschema.validate(yaml.safe_load(GOOD), schema)
    assert schema["additionalProperties"] is False
    cam = schema["$defs"]["CameraConfig"]["properties"]
    assert all("description" in v and "title" in v for v in cam.values())


@pytest.mark.parametrize(
    ("storage", "spool"),
    [
        ({}, "campusguard-events.spool.jsonl"),
        ({"sqlite": "/var/lib/campusguard/events.db"}, "/var/lib/campusguard/events.spool.jsonl"),
        ({"sqlite": "/var/lib/cg/events.db", "spool": "/srv/spool.jsonl"}, "/srv/spool.jsonl"),
    ],
)
def test_the_event_spool_defaults_to_beside_the_sqlite_file(storage: dict, spool: str) -> None:
    assert StorageConfig(**storage).spool_path() == Path(spool)


def test_dumped_points_load_back_as_the_numbers_they_were() -> None:
    """`dump_config_yaml` writes lists of points by text (a fast path through `json` and a number-by-number
    one): ints stay ints, floats floats, an exponent or an infinity reads back as a float, not a string."""
    import yaml

    from campusguard.app.config.root import dump_config_yaml

    polygons = [
        [[1.0, 2], [0.5, 3.25], [-0.0, 100000000000000000000.0]],
        [[1e-05, 2.0], [3.0, 4.5], [5.0, 6.0]],
        [[float("inf"), 1.0], [2.0, 3.0], [4.0, 5.0]],
    ]
    data = {"cameras": [{"id": "c", "zones": [{"name": f"z{k}", "polygon": p} for k, p in enumerate(polygons)]}]}
    back = yaml.safe_load(dump_config_yaml(data))["cameras"][0]["zones"]
    for zone, polygon in zip(back, polygons, strict=True):
        assert zone["polygon"] == polygon
        assert [[type(v) for v in p] for p in zone["polygon"]] == [[type(v) for v in p] for p in polygon]
