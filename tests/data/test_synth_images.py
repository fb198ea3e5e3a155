"""Still-image generator: determinism, label validity, no unlabelled visible object, CLI errors."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from campusguard.cli.main import main as cli_main
from campusguard.data.synth import COCO_NAMES, SYNTH_CLASS_IDS, generate_dataset, render_image
from campusguard.data.synth.images import ImageParams, encode_jpeg
from campusguard.errors import InvalidInputError


def _tree_hash(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "data.yaml"
    }


def test_class_ids_are_coco() -> None:
    assert [COCO_NAMES[i] for i in SYNTH_CLASS_IDS] == ["person", "bicycle", "car", "motorcycle", "bus", "truck"]
    assert len(COCO_NAMES) == 80


def test_same_seed_same_bytes_different_seed_different(tmp_path: Path) -> None:
    a = generate_dataset(tmp_path / "a", images=12, seed=3)
    b = generate_dataset(tmp_path / "b", images=12, seed=3)
    c = generate_dataset(tmp_path / "c", images=12, seed=4)
    ha, hb, hc = _tree_hash(a.out_dir), _tree_hash(b.out_dir), _tree_hash(c.out_dir)
    assert len(ha) == 24 and ha == hb
    assert ha != hc
    # order independence: rendering image 7 alone gives the same pixels
    im = render_image(3, 7)
    assert hashlib.sha256(encode_jpeg(im.image, im.jpeg_quality)).hexdigest() == ha["images/train/000007.jpg"]


def test_data_yaml_and_splits(tmp_path: Path) -> None:
    import yaml

    s = generate_dataset(tmp_path / "d", images=10, seed=0, val_fraction=0.2)
    cfg = yaml.safe_load(s.data_yaml.read_text())
    assert Path(cfg["path"]).is_absolute() and cfg["nc"] == 8
    assert cfg["names"] == {i: COCO_NAMES[i] for i in range(8)}
    assert (s.n_train, s.n_val) == (8, 2)
    assert len(list((s.out_dir / "images/val").glob("*.jpg"))) == 2
    assert len(list((s.out_dir / "labels/train").glob("*.txt"))) == 8


@pytest.mark.parametrize("index", range(30))
def test_labels_tight_inside_and_every_visible_object_labelled(index: int) -> None:
    imap = np.zeros((640, 640), np.int32)
    im = render_image(11, index, instance_map=imap)
    for o in im.objects:
        x1, y1, x2, y2 = o.xyxy
        assert 0 <= x1 < x2 <= 640 and 0 <= y1 < y2 <= 640
        assert o.class_id in SYNTH_CLASS_IDS
        assert x2 - x1 >= 6 and y2 - y1 >= 12  # thin upright people: see render.compose
        assert o.visible_fraction >= 0.4
    # labelled objects' visible pixels lie inside their box, and their box is tight on the drawn extent
    for o in im.objects:
        ys, xs = np.nonzero(imap == o.key + 1)
        assert len(xs) > 0
        x1, y1, x2, y2 = o.xyxy
        assert xs.min() >= x1 and xs.max() < x2 and ys.min() >= y1 and ys.max() < y2


def test_visible_sprites_are_labelled_or_props(monkeypatch: pytest.MonkeyPatch) -> None:
    from campusguard.data.synth import images as images_mod

    captured: list = []
    orig = images_mod.compose

    def spy(frame, items, **kw):  # noqa: ANN001, ANN003, ANN202
        captured[:] = list(items)
        return orig(frame, items, **kw)

    monkeypatch.setattr(images_mod, "compose", spy)
    seen_props = 0
    dropped = 0
    for index in range(20):
        imap = np.zeros((640, 640), np.int32)
        im = images_mod.render_image(5, index, instance_map=imap)
        labelled = {o.key for o in im.objects}
        visible_ids = set(np.unique(imap).tolist()) - {0}
        for sid in visible_ids:
            item = captured[sid - 1]
            if item.class_id < 0:
                seen_props += 1
            else:
                assert item.key in labelled, f"image {index}: visible object {item.key} has no label"
        dropped += sum(1 for i, it in enumerate(captured) if it.class_id >= 0 and i + 1 not in visible_ids)
    assert seen_props > 0
    assert dropped > 0  # the placement rule did reject some objects, so the check above was exercised


def test_bad_arguments_raise_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InvalidInputError, match="--images"):
        generate_dataset(tmp_path, images=-1)
    assert cli_main(["synth", "--out", str(tmp_path / "x"), "--images", "-3"]) == 2
    assert cli_main(["synth", "--out", str(tmp_path / "x"), "--images", "2", "--video-size", "big"]) == 2
    assert cli_main(["synth", "--out", str(tmp_path / "x"), "--images", "2", "--val-fraction", "1.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("error: --") for line in err)


def test_cli_writes_images_and_videos(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ds"
    rc = cli_main(
        [
            "synth",
            "--out",
            str(out),
            "--images",
            "4",
            "--videos",
            "1",
            "--seed",
            "2",
            "--video-seconds",
            "3",
            "--fps",
            "5",
            "--video-size",
            "480x270",
        ]
    )
    assert rc == 0, capsys.readouterr().err
    truth = json.loads((out / "videos" / "video_000.json").read_text())
    assert truth["seed"] == 2000 and truth["num_frames"] == 15 and truth["resolution_wh"] == [480, 270]
    assert (out / "videos" / "video_000.mp4").stat().st_size > 0
    assert len(list((out / "images" / "train").glob("*.jpg"))) == 3


def _lying_people(params: ImageParams, images: int) -> tuple[int, int]:
    """(people drawn lying: boxes much wider than tall, all people) over ``images`` images of seed 0."""
    lying = people = 0
    for i in range(images):
        for o in render_image(0, i, imgsz=320, params=params).objects:
            if o.class_id == 0:
                x1, y1, x2, y2 = o.xyxy
                people += 1
                lying += int((x2 - x1) > 1.3 * (y2 - y1))
    return lying, people


def test_some_people_lie_on_the_ground_so_a_trained_detector_finds_fallen_people() -> None:
    lying, people = _lying_people(ImageParams(), 40)
    assert people > 100
    assert 0.03 * people <= lying <= 0.2 * people  # default lying_fraction 0.08, some occluded or far
    none, _ = _lying_people(ImageParams(lying_fraction=0.0), 40)
    assert none < lying / 4  # without lying people only a few wide boxes (people half hidden)


def _wide_person_labels(labels_dir: Path) -> tuple[int, int]:
    """(person labels much wider than tall, all person labels) in a YOLO labels folder (square images)."""
    wide = people = 0
    for txt in labels_dir.glob("*.txt"):
        for line in txt.read_text().splitlines():
            cls, _, _, w, h = line.split()
            if cls == "0":
                people += 1
                wide += int(float(w) > 1.3 * float(h))
    return wide, people


def test_cli_lying_fraction_sets_the_share_of_people_drawn_lying(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["synth", "--out", str(tmp_path / "bad"), "--images", "10", "--lying-fraction", "1.5"]) == 2
    assert capsys.readouterr().err.strip().startswith("error: --lying-fraction")
    counts = {}
    for frac in ("0", "0.6"):
        out = tmp_path / f"lying{frac}"
        args = ["synth", "--out", str(out), "--images", "20", "--imgsz", "320", "--val-fraction", "0.05"]
        assert cli_main([*args, "--lying-fraction", frac]) == 0
        counts[frac] = _wide_person_labels(out / "labels" / "train")
    (none, people0), (many, people6) = counts["0"], counts["0.6"]
    assert people0 > 40 and people6 > 40
    assert many > 0.3 * people6 > 4 * none  # 60% drawn lying (some hidden or far) against almost none


def test_lighting_weights_choose_the_images_lightings_and_the_default_keeps_the_old_images() -> None:
    counts = {li: 0 for li in ("day", "overcast", "dusk", "night")}
    for i in range(40):
        counts[render_image(0, i, imgsz=160, params=ImageParams(lighting_weights=(0.0, 0.0, 1.0, 3.0))).lighting] += 1
    assert counts["day"] == counts["overcast"] == 0
    assert counts["night"] > counts["dusk"] > 0
    # the default weights as given, not re-normalised: the same images as before the option existed
    assert [render_image(0, i, imgsz=160).lighting for i in range(20)] == [
        render_image(0, i, imgsz=160, params=ImageParams(lighting_weights=(0.4, 0.25, 0.15, 0.2))).lighting
        for i in range(20)
    ]
    for bad in ((1.0, 2.0), (1.0, -1.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0), (float("nan"), 1.0, 1.0, 1.0)):
        with pytest.raises(InvalidInputError, match="lighting weights"):
            ImageParams(lighting_weights=bad)


def test_cli_lighting_sets_the_share_of_each_lighting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["synth", "--images", "4", "--imgsz", "160"]
    for bad, says in (("night=2,moon=1", "NAME=WEIGHT"), ("night=x", "must be a number"), ("night=0", "positive sum")):
        assert cli_main([*base, "--out", str(tmp_path / "bad"), "--lighting", bad]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error:") and says in err and "\n" not in err
    assert cli_main([*base, "--out", str(tmp_path / "night"), "--lighting", "night=1"]) == 0
    dark = tmp_path / "night" / "images"
    means = [float(cv2.imread(str(p)).mean()) for p in sorted(dark.rglob("*.jpg"))]
    assert cli_main([*base, "--out", str(tmp_path / "day"), "--lighting", "day=1"]) == 0
    bright = [float(cv2.imread(str(p)).mean()) for p in sorted((tmp_path / "day" / "images").rglob("*.jpg"))]
    assert len(means) == len(bright) == 4
    assert max(means) < min(bright)  # every night image darker than every day image of the same seed
