"""Console test fixtures (the helpers are in `fakes_console`): the scene video, a built console, a live server."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs the console extra")
pytest.importorskip("argon2", reason="needs the console extra")

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from fakes_console import (  # noqa: E402
    PASSWORDS,  # noqa: F401 - re-exported for test_browser_console until it imports fakes_console
    ConsoleUnderTest,
    LiveServer,
    console_yaml,
    make_console,
    served_console,
)
from fakes_watch import write_scene  # noqa: E402


@pytest.fixture(scope="session")
def console_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6 s of 320x180 at 10 fps: a red 'person' walks into the 'east' zone (an intrusion from about 2.9 s)."""
    return write_scene(tmp_path_factory.mktemp("console-video") / "scene.mp4")


@pytest.fixture
def console(console_video: Path, tmp_path: Path) -> Iterator[ConsoleUnderTest]:
    """The console over a runtime that is built (store open, zones, config) but not started."""
    config = tmp_path / "watch.yaml"
    config.write_text(console_yaml(console_video, tmp_path))
    c = make_console(config, tmp_path)
    yield c
    c.runtime.stop()
    c.users.close()


@pytest.fixture
def live_server(console_video: Path, tmp_path: Path) -> Iterator[LiveServer]:
    """A started runtime on the scene video looped in real time, served by a real uvicorn."""
    config = tmp_path / "watch.yaml"
    config.write_text(console_yaml(console_video, tmp_path, live=True))
    yield from served_console(config, tmp_path)
