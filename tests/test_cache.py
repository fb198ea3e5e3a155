"""The package's cache root and the stable keys of cached files (`campusguard.cache`)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from campusguard.cache import cache_dir, file_key

SRC = Path(__file__).resolve().parents[1] / "src"


def test_the_cache_root_is_the_environment_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("CAMPUSGUARD_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    assert (tmp_path / "c").is_dir()


def test_a_file_key_changes_when_the_file_does(tmp_path):
    a = tmp_path / "a.pt"
    a.write_bytes(b"one")
    first = file_key(a)
    assert first == file_key(a) and len(first) == 16
    os.utime(a, ns=(1, 1))
    assert file_key(a) != first  # rewritten: a new key, so a stale export is never served
    b = tmp_path / "b.pt"
    b.write_bytes(b"one")
    os.utime(b, ns=(1, 1))
    assert file_key(b) != file_key(a)  # another path


def _cached_export_path_in_a_new_process(checkpoint: Path, cache: Path, hashseed: str) -> str:
    """`exported_onnx_path` of a checkpoint in a read-only folder, worked out by a fresh interpreter."""
    code = textwrap.dedent(
        f"""
        import os
        from pathlib import Path
        os.access = lambda *a, **k: False  # the checkpoint's folder is read-only
        from campusguard.models.registry import exported_onnx_path
        from campusguard.models.resolve import ModelRef
        print(exported_onnx_path(ModelRef("pt", path=Path({str(checkpoint)!r})), (640, 640), 1, False))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(SRC), "CAMPUSGUARD_CACHE": str(cache), "PYTHONHASHSEED": hashseed}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_two_processes_name_the_export_of_a_read_only_checkpoint_alike(tmp_path):
    """The export cache is named by `hashlib`, not the per-process salted ``hash()``: with a read-only
    checkpoint folder every process used to export again under a new name, and the cache grew."""
    checkpoint = tmp_path / "ro" / "best.pt"
    checkpoint.parent.mkdir()
    checkpoint.write_bytes(b"weights")
    first = _cached_export_path_in_a_new_process(checkpoint, tmp_path / "cache", "1")
    second = _cached_export_path_in_a_new_process(checkpoint, tmp_path / "cache", "2")
    assert first == second
    assert Path(first.strip()).parent == tmp_path / "cache"
    assert Path(first.strip()).name == f"best-{file_key(checkpoint)}.640x640-b1-static-fp32.onnx"


def test_the_suite_runs_on_a_temporary_cache_never_the_users():
    # tests/conftest.py points the whole session at a fresh temporary root before any test module is
    # imported (read through the environment: several conftest modules share the name `conftest`)
    root = cache_dir()
    assert root.name.startswith("campusguard-test-cache-") and root == Path(os.environ["CAMPUSGUARD_CACHE"])
    assert not root.is_relative_to(Path.home() / ".cache")
    child = subprocess.run(
        [sys.executable, "-c", "from campusguard.cache import cache_dir; print(cache_dir())"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert Path(child.stdout.strip()) == root  # the CLI processes the tests start inherit it
