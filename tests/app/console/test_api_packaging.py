"""The core does not need the console extra: without fastapi, uvicorn, argon2 and prometheus-client installed,
`campusguard` and `watch` still work, and the console commands say which extra to install, in one line."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[3]
CONSOLE_MODULES = ("fastapi", "starlette", "uvicorn", "argon2", "prometheus_client")

BLOCKER = f"""
import sys, runpy
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {CONSOLE_MODULES!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Block())
sys.argv = ["campusguard", *sys.argv[1:]]
import campusguard.app.service, campusguard.app.events.sqlite  # the watch pipeline and the store
from campusguard.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def run_without_console_extra(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER, *args],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


def test_core_and_cli_work_without_the_console_extra(tmp_path):
    r = run_without_console_extra("--help")
    assert r.returncode == 0, r.stderr
    assert "serve" in r.stdout and "users" in r.stdout
    r = run_without_console_extra("serve", str(tmp_path / "watch.yaml"))
    assert r.returncode == 2
    assert r.stderr.strip().startswith("error: ") and "pip install 'campusguard[console]'" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = run_without_console_extra("users", "list", "--users-db", str(tmp_path / "u.db"))
    assert r.returncode == 2 and "argon2 is not installed" in r.stderr and "campusguard[console]" in r.stderr


def test_console_extra_and_package_data_are_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    console = " ".join(project["project"]["optional-dependencies"]["console"])
    for dist in ("fastapi", "uvicorn", "argon2-cffi", "prometheus-client", "paho-mqtt", "python-multipart", "authlib"):
        assert dist in console
    core = " ".join(project["project"]["dependencies"])
    assert "av>=" in core  # PyAV: every video is H.264 (recordings, clips, the demo's), console or not
    assert "app/console/static/**/*" in project["tool"]["setuptools"]["package-data"]["campusguard"]
    assert "schemathesis" in " ".join(project["project"]["optional-dependencies"]["dev"])
