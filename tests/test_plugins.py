"""Plugins by discovery (issue 41): a rule kind, an alert sink and a backend are each one module dropped
into its folder; the registries find them with `campusguard.plugins.discover`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import cv2
import pytest
import yaml

import campusguard
from campusguard.plugins import discover

PACKAGE = Path(campusguard.__file__).parent
TESTS = Path(__file__).parent


@dataclass(frozen=True)
class Entry:
    label: str
    order: int | None = None


def _package(root: Path, modules: dict[str, str]) -> str:
    pkg = root / "plugpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, body in modules.items():
        (pkg / f"{name}.py").write_text(body)
    sys.path.insert(0, str(root))
    return "plugpkg"


def test_discover_orders_by_order_then_module_then_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    header = f"from {__name__} import Entry\n"
    package = _package(
        tmp_path,
        {
            "b_late": header + "Z = Entry('b-z')\nA = Entry('b-a')\n",
            "a_early": header + "ONE = Entry('a-ordered', order=20)\nTWO = Entry('a-plain')\n",
            "c_first": header + "FIRST = Entry('c-ordered', order=10)\n",
            "d_reexport": "from plugpkg.c_first import FIRST\n",  # counted once, where first found
            "registry": "raise AssertionError('excluded modules are never imported')\n",
            "_private": "raise AssertionError('private modules are never imported')\n",
        },
    )
    try:
        found = discover(package, Entry, exclude=("registry",))
        assert [f.entry.label for f in found] == ["c-ordered", "a-ordered", "a-plain", "b-z", "b-a"]
        assert [(f.module, f.name) for f in found][:2] == [("plugpkg.c_first", "FIRST"), ("plugpkg.a_early", "ONE")]
        only_b = discover(package, Entry, include=lambda n: n.startswith("b"))
        assert [f.entry.label for f in only_b] == ["b-z", "b-a"]
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == "plugpkg" or m.startswith("plugpkg.")]:
            del sys.modules[name]


def test_a_plugin_that_fails_to_import_is_an_error(tmp_path: Path) -> None:
    package = _package(tmp_path, {"broken": "import campusguard_no_such_module\n"})
    try:
        with pytest.raises(ModuleNotFoundError, match="campusguard_no_such_module"):
            discover(package, Entry)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == "plugpkg" or m.startswith("plugpkg.")]:
            del sys.modules[name]


def _renamed_copy(source: Path, target: Path, old: str, new: str) -> None:
    """``source`` written to ``target`` with every ``old`` (the kind, in strings and names) made ``new``."""
    text = source.read_text(encoding="utf-8")
    assert text.count(old) >= 2, f"{source.name} no longer spells its kind {old!r}"
    target.write_text(text.replace(old, new), encoding="utf-8")


def _first_frames(path: Path, frames: int) -> Path:
    """The opening ``frames`` of the synthetic campus video of seed 3 (a person crosses the fence line at 3.0 s),
    rendered without the rest of its 10 s."""
    from campusguard.data.synth.video import SynthVideo

    video = SynthVideo(3, (640, 360), 10.0, 10)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10.0, video.size_wh)
    objects = []
    for i in range(frames):
        frame, seen = video.frame(i)
        writer.write(frame)
        objects.append(seen)
    writer.release()
    video.truth(objects, video_name=path.name).save(path.with_suffix(".json"))  # the zones and the fence line
    return path


def test_copies_of_a_rule_module_and_a_sink_module_work_with_only_their_kind_renamed(tmp_path: Path) -> None:
    """Target 2: copies of ``app/rules/line_rules.py`` and ``app/alerts/jsonl.py`` dropped into their folders
    (of a copy of the package) with only their kind renamed: ``config schema`` documents both (two models of one
    class name), ``watch`` stores the renamed rule's incident under its kind and the renamed sink writes it, and
    the registry and architecture tests pass with the copies in place. No other file is touched."""
    root = tmp_path / "src"
    shutil.copytree(PACKAGE, root / "campusguard", ignore=shutil.ignore_patterns("__pycache__"))
    rules, alerts = root / "campusguard" / "app" / "rules", root / "campusguard" / "app" / "alerts"
    _renamed_copy(rules / "line_rules.py", rules / "line_rules_copy.py", "line_crossing", "line_crossing2")
    _renamed_copy(alerts / "jsonl.py", alerts / "jsonl_copy.py", '"jsonl"', '"jsonl2"')
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{TESTS}", "CAMPUSGUARD_CACHE": str(tmp_path / "cache")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "campusguard.cli.main", *args]
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)

    schema = cli("config", "schema")
    assert schema.returncode == 0, schema.stderr[-2000:]
    text = schema.stdout
    assert '"line_crossing2"' in text and '"jsonl2"' in text and json.loads(text)["title"] == "WatchConfig"

    video = _first_frames(tmp_path / "fence.mp4", 45)
    from campusguard.app.demo import demo_config

    truth = json.loads(video.with_suffix(".json").read_text())
    config = demo_config(truth, video, tmp_path, imgsz=320, precision="fp32")
    camera = config["cameras"][0]
    camera["realtime"] = False
    camera["rules"] = [{"kind": "line_crossing2", "line": "fence_line", "classes": ["person"]}]
    config["alerts"] = [{"kind": "jsonl2", "path": str(tmp_path / "alerts.jsonl")}]
    config["outputs"] = {"metrics_interval_s": 0}
    (tmp_path / "watch.yaml").write_text(yaml.safe_dump(config))
    watch = cli("watch", str(tmp_path / "watch.yaml"))
    assert watch.returncode == 0, watch.stderr[-2000:]

    from campusguard.app.events import read_events

    stored = [(e.rule_kind, e.rule_name, e.start_s) for e in read_events(tmp_path / "events.db")]
    assert stored == [("line_crossing2", "line_crossing2:fence_line", pytest.approx(3.0, abs=0.5))], stored
    sent = [json.loads(line) for line in (tmp_path / "alerts.jsonl").read_text().splitlines()]
    assert [(d["rule_kind"], d["phase"]) for d in sent] == [("line_crossing2", "start")]

    architecture = str(TESTS / "test_architecture.py")
    suites = [  # the registries' tests, and the architecture tests about plugins (the rest take minutes)
        str(TESTS / "app" / "rules" / "test_rules_registry.py"),
        str(TESTS / "app" / "alerts" / "test_alerts_registry.py"),
        *(
            f"{architecture}::{name}"
            for name in (
                "test_no_import_cycles",
                "test_a_rule_is_one_module_found_by_discovery",
                "test_a_sink_is_one_module_found_by_discovery",
                "test_the_config_package_is_schema_only",
            )
        ),
    ]
    registry_tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-x", "-p", "no:cacheprovider", *suites],
        capture_output=True,
        text=True,
        env=env,
        cwd=TESTS.parent,
        timeout=600,
    )
    assert registry_tests.returncode == 0, registry_tests.stdout[-3000:]
    # the suites ran on the copy: they iterated over the copied kinds too
    assert "test_each_kind_builds_its_rule_from_its_example[line_crossing2] PASSED" in registry_tests.stdout
    assert "test_every_kind_parses_with_its_example_and_a_name[jsonl2] PASSED" in registry_tests.stdout
