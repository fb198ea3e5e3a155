"""`ConfigEditor` on its own, with no console running: what a command saving a camera's zones relies on."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from campusguard.app.config import load_config
from campusguard.app.config.editor import CameraNotInFileError, ConfigEditor, camera_parts
from campusguard.app.config.revisions import RevisionConflictError, revisions_dir
from campusguard.errors import ConfigError

CONFIG = """\
cameras:
  - id: gate
    source: gate.mp4
    zones:
      - name: east
        polygon: [[160, 0], [320, 0], [320, 180], [160, 180]]
    rules:
      - kind: intrusion
        zone: east
        classes: [person]
  - id: yard
    source: yard.mp4
    zones:
      - name: lawn  # a hand-written comment the rewrite does not need to keep
        polygon: [[0, 0], [50, 0], [50, 50], [0, 50]]
storage:
  sqlite: events.db
"""
WEST = {"name": "west", "polygon": [[0, 0], [100, 0], [100, 90], [0, 90]]}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "site.yaml"
    path.write_text(CONFIG)
    return path


def _cameras(path: Path) -> dict[str, dict]:
    return {c["id"]: c for c in yaml.safe_load(path.read_text())["cameras"]}


def test_a_save_rewrites_only_its_camera_and_keeps_the_previous_file(config: Path) -> None:
    editor, running = ConfigEditor(config), load_config(config)
    zones, revision = editor.camera_view("gate", running)
    before = config.read_bytes()

    saved = editor.save("gate", {"zones": [*zones["zones"], WEST]}, revision, running)

    assert saved.changed and saved.before == zones and saved.revision != revision
    assert [z["name"] for z in saved.zones["zones"]] == ["east", "west"]
    assert editor.camera_view("gate", load_config(config)) == (saved.zones, saved.revision)  # read back from disk
    cameras = _cameras(config)
    assert [z["name"] for z in cameras["gate"]["zones"]] == ["east", "west"]
    assert cameras["gate"]["rules"][0]["name"] == "intrusion:east"  # written with its name
    assert cameras["yard"]["zones"][0]["name"] == "lawn"
    assert config.with_name("site.yaml.bak").read_bytes() == before
    assert [p.read_bytes() for p in revisions_dir(config).iterdir()] == [before]
    assert saved.config is not None and saved.parts == camera_parts(saved.config.config.cameras[0])


def test_a_save_on_a_stale_revision_is_refused_and_writes_nothing(config: Path) -> None:
    editor, running = ConfigEditor(config), load_config(config)
    _, revision = editor.camera_view("gate", running)
    _, yard_revision = editor.camera_view("yard", running)
    editor.save("gate", {"zones": [WEST], "rules": []}, revision, running)  # another admin saved gate
    written = config.read_bytes()

    with pytest.raises(RevisionConflictError) as refused:
        editor.save("gate", {"rules": []}, revision, running)
    assert refused.value.camera == "gate" and refused.value.current != revision
    assert config.read_bytes() == written
    assert editor.camera_view("yard", running)[1] == yard_revision  # another camera's save is no conflict


def test_a_save_that_changes_nothing_writes_nothing(config: Path) -> None:
    editor, running = ConfigEditor(config), load_config(config)
    gate = running.config.cameras[0]
    saved = editor.save("gate", {}, None, running, applied=camera_parts(gate))
    assert not saved.changed and saved.config is None
    assert config.read_text() == CONFIG and not revisions_dir(config).exists()


def test_an_invalid_edit_names_the_field_of_the_body_not_the_file(config: Path) -> None:
    editor, running = ConfigEditor(config), load_config(config)
    with pytest.raises(ConfigError) as bad:
        editor.save("gate", {"rules": [{"kind": "intrusion", "zone": "nowhere"}]}, None, running)
    assert str(bad.value).startswith("rules[0]") and str(config) not in str(bad.value)
    assert config.read_text() == CONFIG


def test_a_camera_renamed_by_hand_is_not_saved(config: Path) -> None:
    editor, running = ConfigEditor(config), load_config(config)
    config.write_text(CONFIG.replace("id: gate", "id: front"))
    with pytest.raises(CameraNotInFileError):
        editor.save("gate", {"zones": [WEST], "rules": []}, None, running)
    assert "front" in _cameras(config)
