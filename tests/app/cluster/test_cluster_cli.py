"""`campusguard watch CONFIG --ray ...` when there is no cluster: one error line naming the address, exit 2."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fakes_cluster import cameras_config, write_walks  # noqa: E402

needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs the ray extra")


def watch(config: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "campusguard.cli.main", "watch", str(config), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})


def errors(run: subprocess.CompletedProcess[str]) -> list[str]:
    """The stderr lines after the model warnings (which `watch` prints first)."""
    lines = run.stderr.strip().splitlines()
    assert not any("Traceback" in line for line in lines)
    return [line for line in lines if line.startswith("error:")]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "watch.yaml"
    path.write_text(cameras_config([write_walks(tmp_path / "v.avi", 5)], tmp_path))
    return path


@needs_ray
def test_no_cluster_on_this_machine_is_one_line(config: Path, tmp_path: Path) -> None:
    empty = tmp_path / "no-ray"
    empty.mkdir()
    run = watch(config, "--ray", "auto", env={"RAY_TMPDIR": str(empty), "RAY_ADDRESS": ""})
    assert run.returncode == 2
    assert errors(run) == [
        "error: cannot join a Ray cluster at 'auto': Could not find any running Ray instance. "
        "Please specify the one to connect to by setting `--address` flag or `RAY_ADDRESS` environment variable."
    ]


@needs_ray
def test_nothing_answering_at_the_address_is_one_line(config: Path) -> None:
    run = watch(config, "--ray", "127.0.0.1:9")
    assert run.returncode == 2
    assert errors(run) == ["error: no Ray cluster answers at 127.0.0.1:9 (Connection refused)"]


@needs_ray
def test_a_malformed_address_is_one_line(config: Path) -> None:
    run = watch(config, "--ray", "somewhere")
    assert run.returncode == 2
    assert errors(run) == ["error: --ray 'somewhere': expected auto, local, HOST:PORT or ray://HOST:PORT"]


def test_without_the_ray_extra_the_hint_names_it(config: Path) -> None:
    """Ray made unimportable in the child (as when the extra is not installed): one line naming the extra."""
    code = (
        "import sys; sys.modules['ray'] = None; from campusguard.cli.main import main; "
        f"sys.exit(main(['watch', {str(config)!r}, '--ray', 'auto']))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    assert errors(run) == ["error: ray is not installed; install it with: pip install 'campusguard[ray]'"]
