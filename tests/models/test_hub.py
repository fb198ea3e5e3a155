"""The weights store against a loopback HTTP server serving a real checkpoint (no network)."""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

from campusguard.errors import InvalidInputError, ModelLoadError, WeightsUnavailableError
from campusguard.models import hub
from weights_server import Behaviour, serve

CHECKPOINT = Path(__file__).parents[1] / "data" / "models" / "yolo26n-campus.pt"  # real, trained here (5.4 MB)


@pytest.fixture(scope="module")
def checkpoint() -> bytes:
    return CHECKPOINT.read_bytes()


@pytest.fixture(scope="module")
def digest(checkpoint: bytes) -> str:
    return hashlib.sha256(checkpoint).hexdigest()


pytestmark = pytest.mark.usefixtures("weights_cache")


def weights_files() -> list[str]:
    return sorted(p.name for p in hub.weights_dir().iterdir() if not p.name.endswith(".lock"))


def test_official_table_names_every_family_size_with_release_urls():
    assert list(hub.OFFICIAL)[:2] == ["yolov8n", "yolov8s"] and len(hub.OFFICIAL) == 15
    for name, w in hub.OFFICIAL.items():
        assert w.file == f"{name}.pt"
        assert w.url == f"https://github.com/ultralytics/assets/releases/download/v8.4.0/{name}.pt"
        assert (w.classes, w.licence) == (80, "AGPL-3.0") and "COCO" in w.trained_on
        assert w.sha256 is None or len(w.sha256) == 64
    assert hub.official_for("YOLOv8n.pt") is hub.OFFICIAL["yolov8n"]
    assert hub.official_for("yolov8n.yaml") is None and hub.official_for("dir/yolov8n.pt") is None


def test_weights_dir_is_under_the_one_cache_root(weights_cache: Path):
    assert hub.weights_dir() == weights_cache / "weights" and hub.weights_dir().is_dir()


def test_pull_with_the_right_digest_caches_and_records_it(checkpoint: bytes, digest: str):
    behaviour = Behaviour(files={"/w/campus.pt": checkpoint})
    with serve(behaviour) as base:
        path = hub.ensure_weights("campus", source=f"{base}/w/campus.pt", sha256=digest)
        again = hub.ensure_weights("campus", source=f"{base}/w/campus.pt")
    assert path == hub.weights_dir() / "campus.pt" and again == path
    assert path.read_bytes() == checkpoint
    gets = [r for r in behaviour.requests if r[0].endswith(".pt")]
    assert len(gets) == 1, "the second call is a cache hit"
    record = json.loads((hub.weights_dir() / "campus.pt.json").read_text())
    assert (record["sha256"], record["verified_by"], record["bytes"]) == (digest, "--sha256", len(checkpoint))
    [entry] = hub.cached_weights()
    assert (entry.name, entry.complete, entry.size_bytes, entry.verified_by) == (
        "campus",
        True,
        len(checkpoint),
        "--sha256",
    )


def test_a_wrong_digest_is_refused_and_nothing_is_cached(checkpoint: bytes):
    with serve(Behaviour(files={"/campus.pt": checkpoint})) as base, pytest.raises(WeightsUnavailableError) as err:
        hub.ensure_weights("campus", source=f"{base}/campus.pt", sha256="0" * 64)
    message = str(err.value)
    assert "\n" not in message and f"{base}/campus.pt" in message and "SHA-256" in message
    assert "campusguard models pull campus --from URL|DIR" in message
    assert weights_files() == []
    assert isinstance(err.value, ModelLoadError)


def test_a_truncated_file_is_refused_and_nothing_is_cached(checkpoint: bytes):
    truncated = checkpoint[: len(checkpoint) // 2]  # served whole, with its own Content-Length
    refused = pytest.raises(WeightsUnavailableError, match="not a usable checkpoint .*truncated")
    with serve(Behaviour(files={"/campus.pt": truncated})) as base, refused as err:
        hub.ensure_weights("campus", source=f"{base}/campus.pt")
    assert "\n" not in str(err.value)
    assert weights_files() == []


def test_a_corrupt_member_is_refused(checkpoint: bytes):
    corrupt = bytearray(checkpoint)
    middle = len(corrupt) // 2
    corrupt[middle : middle + 64] = bytes(64)  # inside a tensor's bytes: the zip's CRC no longer matches
    with (
        serve(Behaviour(files={"/campus.pt": bytes(corrupt)})) as base,
        pytest.raises(WeightsUnavailableError, match="corrupt"),
    ):
        hub.ensure_weights("campus", source=f"{base}/campus.pt")
    assert weights_files() == []


def test_a_download_cut_off_is_resumed_with_range(checkpoint: bytes, digest: str):
    cut = 1_000_000
    behaviour = Behaviour(files={"/campus.pt": checkpoint}, cut_after=cut, cuts=1)
    with serve(behaviour) as base:
        path = hub.ensure_weights("campus", source=f"{base}/campus.pt", sha256=digest)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    gets = [r for r in behaviour.requests if r[0] == "/campus.pt"]
    assert gets == [("/campus.pt", None), ("/campus.pt", f"bytes={cut}-")]
    assert weights_files() == ["campus.pt", "campus.pt.json"]


def test_a_download_cut_every_time_keeps_the_part_and_the_next_pull_resumes(checkpoint: bytes, digest: str):
    cut = 700_000
    behaviour = Behaviour(files={"/campus.pt": checkpoint}, cut_after=cut, cuts=3)
    with serve(behaviour) as base:
        with pytest.raises(WeightsUnavailableError, match="transfer cut") as err:
            hub.ensure_weights("campus", source=f"{base}/campus.pt", sha256=digest)
        assert "\n" not in str(err.value) and "campusguard models pull campus" in str(err.value)
        part = hub.weights_dir() / "campus.pt.part"
        assert part.stat().st_size == 3 * cut and weights_files() == ["campus.pt.part"]
        [entry] = hub.cached_weights()
        assert not entry.complete and entry.size_bytes == 3 * cut
        path = hub.ensure_weights("campus", source=f"{base}/campus.pt", sha256=digest)
    assert behaviour.requests[-1] == ("/campus.pt", f"bytes={3 * cut}-")
    assert path.read_bytes() == checkpoint and weights_files() == ["campus.pt", "campus.pt.json"]


def test_a_server_that_ignores_range_sends_the_whole_file_again(checkpoint: bytes, digest: str):
    behaviour = Behaviour(files={"/campus.pt": checkpoint}, cut_after=500_000, cuts=1, ignore_range=True)
    with serve(behaviour) as base:
        path = hub.ensure_weights("campus", source=f"{base}/campus.pt", sha256=digest)
    assert [r[1] for r in behaviour.requests] == [None, "bytes=500000-"]  # asked to resume, got 200 and all of it
    assert path.read_bytes() == checkpoint


def test_a_cache_hit_is_checked_against_a_given_digest(tmp_path: Path, checkpoint: bytes, digest: str):
    src = tmp_path / "best.pt"
    src.write_bytes(checkpoint)
    hub.ensure_weights("campus", source=str(src))
    assert hub.ensure_weights("campus", sha256=digest) == hub.weights_dir() / "campus.pt"
    with pytest.raises(
        WeightsUnavailableError, match=r"cached with another SHA-256 .* \(campusguard models rm campus\)"
    ):
        hub.ensure_weights("campus", sha256="3" * 64)


def test_a_mirror_folder_with_sha256sums_verifies_the_official_name(
    tmp_path: Path, checkpoint: bytes, digest: str, monkeypatch: pytest.MonkeyPatch
):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "campus.pt").write_bytes(checkpoint)
    (mirror / "SHA256SUMS").write_text(f"{digest}  campus.pt\n{'1' * 64}  other.pt\n")
    monkeypatch.setenv(hub.MIRROR_ENV, str(mirror))
    monkeypatch.setenv(hub.OFFLINE_ENV, "1")  # a folder is no download: offline still reads it
    path = hub.ensure_weights("campus")
    assert path.read_bytes() == checkpoint
    assert hub.cached_weights()[0].verified_by == "SHA256SUMS"
    assert hub.cached_weights()[0].source == str(mirror / "campus.pt")


def test_a_mirror_whose_sha256sums_disagrees_is_refused(tmp_path: Path, checkpoint: bytes, monkeypatch):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "campus.pt").write_bytes(checkpoint)
    (mirror / "SHA256SUMS").write_text(f"{'2' * 64} *campus.pt\n")
    monkeypatch.setenv(hub.MIRROR_ENV, str(mirror))
    with pytest.raises(WeightsUnavailableError, match="not the SHA256SUMS"):
        hub.ensure_weights("campus")
    assert weights_files() == []


def test_an_http_mirror_serves_the_official_name_checked_against_the_pinned_digest(checkpoint: bytes, monkeypatch):
    # the mirror's yolov8n.pt is not Ultralytics' file: the pinned digest refuses it, SHA256SUMS notwithstanding
    fake_sums = f"{hashlib.sha256(checkpoint).hexdigest()}  yolov8n.pt\n".encode()
    behaviour = Behaviour(files={"/m/yolov8n.pt": checkpoint, "/m/SHA256SUMS": fake_sums})
    with serve(behaviour) as base:
        monkeypatch.setenv(hub.MIRROR_ENV, f"{base}/m/")
        with pytest.raises(WeightsUnavailableError, match="not the pinned"):
            hub.ensure_weights("yolov8n.pt")
    assert weights_files() == []


def test_offline_names_the_url_and_the_pull_command_without_touching_the_network(monkeypatch):
    monkeypatch.setenv(hub.OFFLINE_ENV, "1")
    started = time.monotonic()
    with pytest.raises(WeightsUnavailableError) as err:
        hub.ensure_weights("yolov8n")
    message = str(err.value)
    assert time.monotonic() - started < 1.0
    assert "\n" not in message
    assert "https://github.com/ultralytics/assets/releases/download/v8.4.0/yolov8n.pt" in message
    assert "campusguard models pull yolov8n --from URL|DIR" in message


def test_an_unreachable_server_fails_fast_with_one_line():
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(WeightsUnavailableError, match=f"127.0.0.1:{port}/campus.pt") as err:
        hub.ensure_weights("campus", source=f"http://127.0.0.1:{port}/campus.pt", timeout_s=2)
    assert "\n" not in str(err.value)


def test_a_stalled_server_times_out():
    import socket

    with socket.socket() as listener:  # accepts connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(WeightsUnavailableError, match="timed out"):
            hub.ensure_weights("campus", source=f"http://127.0.0.1:{port}/campus.pt", timeout_s=0.5)
        assert time.monotonic() - started < 5


def test_a_missing_file_on_the_mirror_falls_back_to_the_next_source(tmp_path: Path, monkeypatch):
    mirror = tmp_path / "empty-mirror"
    mirror.mkdir()
    monkeypatch.setenv(hub.MIRROR_ENV, str(mirror))
    monkeypatch.setenv(hub.OFFLINE_ENV, "1")
    with pytest.raises(WeightsUnavailableError) as err:
        hub.ensure_weights("yolo26n")
    message = str(err.value)
    assert str(mirror / "yolo26n.pt") in message and "v8.4.0/yolo26n.pt not tried" in message


def test_unknown_names_and_bad_input_are_one_line():
    with pytest.raises(WeightsUnavailableError, match="not one of Ultralytics' weights"):
        hub.ensure_weights("mymodel")
    with pytest.raises(InvalidInputError, match="'yolov8n.yaml' is not a checkpoint name"):
        hub.ensure_weights("yolov8n.yaml")
    with pytest.raises(InvalidInputError, match="letters, digits"):
        hub.ensure_weights("../etc/passwd", source="/tmp")
    with pytest.raises(InvalidInputError, match="64 hexadecimal"):
        hub.ensure_weights("campus", source="/tmp", sha256="abc")
    with pytest.raises(WeightsUnavailableError, match="--from /no/such/dir: no such file or folder"):
        hub.ensure_weights("campus", source="/no/such/dir")
    assert list(hub.weights_dir().iterdir()) == []  # no lock or partial file left by a refused name


def test_remove_deletes_checkpoint_record_part_and_exports(tmp_path: Path, checkpoint: bytes):
    src = tmp_path / "best.pt"
    src.write_bytes(checkpoint)
    hub.ensure_weights("campus", source=str(src))
    export = hub.weights_dir() / "campus.640x640-b1-static-fp32.onnx"
    export.write_bytes(b"onnx")
    (hub.weights_dir() / "campus.pt.part").write_bytes(b"partial")
    [entry] = hub.cached_weights()
    assert entry.exports == (export,) and entry.size_bytes == len(checkpoint) + 4 + 7
    assert entry.verified_by is None  # no digest anywhere: kept, and said to be unverified
    assert hub.remove_weights("campus") is True
    assert list(hub.weights_dir().iterdir()) == []
    assert hub.remove_weights("campus") is False


def test_two_pulls_of_one_name_at_once_download_it_once(checkpoint: bytes, digest: str):
    from concurrent.futures import ThreadPoolExecutor

    behaviour = Behaviour(files={"/campus.pt": checkpoint})
    with serve(behaviour) as base, ThreadPoolExecutor(2) as pool:
        pulls = [pool.submit(hub.ensure_weights, "campus", source=f"{base}/campus.pt", sha256=digest) for _ in range(2)]
        paths = [p.result(timeout=60) for p in pulls]
    assert paths[0] == paths[1] and paths[0].read_bytes() == checkpoint
    assert [r for r in behaviour.requests if r[0] == "/campus.pt"] == [("/campus.pt", None)]
