"""A PostgreSQL server of the test's own on a free loopback port, that can be stopped and started again.

Debian's server binaries (``initdb``, ``pg_ctl``); as root the cluster belongs to ``nobody``
(PostgreSQL refuses to run as root). The test skips when the binaries are missing, and fails under
``CI=true`` (``.ci/run`` installs them).
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from http_camera import free_port


def _bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


class OwnPostgres:
    """``initdb`` into a fresh folder, then `start`/`stop` on its port; `url` names database ``test``.

    The folder is a new one under the system's temporary folder (pytest's is private to root, and
    the server runs as ``nobody``); `close` removes it."""

    def __init__(self) -> None:
        binaries = _bin()
        if binaries is None:
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail("PostgreSQL's server binaries (initdb, pg_ctl) are missing")
            pytest.skip("PostgreSQL's server binaries (initdb, pg_ctl) are missing: apt-get install postgresql")
        self.bin = binaries
        root = Path(tempfile.mkdtemp(prefix="campusguard-pg-"))
        root.chmod(0o755)
        self.root = root
        self.data = root / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/test"
        self._as = ["runuser", "-u", "nobody", "--"] if os.geteuid() == 0 else []
        if os.geteuid() == 0:
            shutil.chown(root, "nobody")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8")
        self.start()
        subprocess.run([str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "test"],
                       check=True, capture_output=True, timeout=60)

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([*self._as, str(self.bin / tool), *args], check=True, capture_output=True, timeout=120,
                       cwd=self.root)

    def start(self) -> None:
        self._run("pg_ctl", "start", "-w", "-D", str(self.data), "-l", str(self.root / "server.log"),
                  "-o", f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.root}")

    def stop(self) -> None:
        self._run("pg_ctl", "stop", "-m", "fast", "-w", "-D", str(self.data))

    def close(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
