"""`campusguard watch`, `config schema` and `config check` through the real entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "app"))
from fakes_watch import write_scene  # noqa: E402

from campusguard.app.demo import EXAMPLE_CONFIG  # noqa: E402
from campusguard.cli.main import main  # noqa: E402


def test_config_schema_prints_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "WatchConfig" and "cameras" in schema["properties"]


def test_config_check_accepts_the_bundled_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check", str(EXAMPLE_CONFIG)]) == 0
    assert "OK (1 camera(s), 5 rule(s)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("cameras: [\n", "c.yaml:2: invalid YAML"),
        ("cameras:\n  - id: a\n    sauce: x.mp4\n", "c.yaml:3: cameras[0].sauce: unknown key 'sauce'"),
        (
            "cameras:\n  - id: a\n    zones:\n      - name: z\n        polygon: [[0, 0], [9, 9], [9, 0], [0, 9]]\n",
            "c.yaml:5: cameras[0].zones[0].polygon: polygon is self-intersecting",
        ),
        (
            "cameras:\n  - id: a\n    rules:\n      - kind: crowd\n        zone: nowhere\n",
            "c.yaml:5: cameras[0].rules[0].zone: rule names unknown zone 'nowhere'",
        ),
    ],
)
def test_config_check_bad_input_is_one_line_and_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, fragment: str
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(text)
    assert main(["config", "check", str(config)]) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and fragment.replace("c.yaml", str(config)) in err


def test_config_check_probe_reports_an_unreachable_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(f"cameras:\n  - id: gate\n    source: {tmp_path / 'gone.mp4'}\n")
    assert main(["config", "check", "--probe", str(config)]) != 0
    err = capsys.readouterr().err.strip()
    assert (
        err
        == f"error: {config}:3: cameras[0].source: camera 'gate': video file '{tmp_path / 'gone.mp4'}' does not exist"
    )


def test_watch_command_runs_a_file_to_the_end(tmp_path: Path) -> None:
    video = write_scene(tmp_path / "scene.mp4", n=30)
    config = tmp_path / "w.yaml"
    config.write_text(
        f"detector:\n  model: yolov8n.yaml\n  imgsz: 160\ncameras:\n  - id: cam1\n    source: {video}\n"
        f"alerts: []\nstorage:\n  sqlite: {tmp_path / 'e.db'}\noutputs:\n  metrics_interval_s: 0\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "campusguard.cli.main", "watch", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "[metrics] cam1:" in proc.stdout and "frames 30" in proc.stdout
    assert (tmp_path / "e.db").exists()


@pytest.mark.parametrize(
    ("options", "level"),
    [
        (["watch", "{config}", "--log-level", "debug"], "DEBUG"),
        (["-v", "watch", "{config}"], "INFO"),
        (["watch", "{config}"], "WARNING"),
        (["-v", "watch", "{config}", "--log-level", "error"], "ERROR"),
    ],
)
def test_watch_log_level_reaches_campusguard_loggers(tmp_path: Path, options: list[str], level: str) -> None:
    """The level applies to CampusGuard's loggers; at ``debug`` libraries stay at INFO (their DEBUG is noise)."""
    config = tmp_path / "missing.yaml"  # the command fails after logging is set up
    show_level = (
        "import logging, sys; from campusguard.cli.main import main; main(sys.argv[1:]); "
        "print(logging.getLevelName(logging.getLogger('campusguard.app.engine').getEffectiveLevel()), "
        "logging.getLevelName(logging.getLogger('urllib3').getEffectiveLevel()))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", show_level, *(o.format(config=config) for o in options)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    library = "INFO" if level == "DEBUG" else level
    assert proc.stdout.strip() == f"{level} {library}", proc.stderr
