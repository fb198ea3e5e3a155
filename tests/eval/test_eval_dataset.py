"""Loading and validating YOLO-format data sets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from campusguard.errors import InvalidInputError
from campusguard.eval import label_path_for, load_yolo_dataset


def test_loads_pixel_boxes_names_and_sizes(write_dataset) -> None:
    yaml_path = write_dataset({"val": {"a": "0 0.5 0.5 0.5 0.5\n1 0.25 0.25 0.5 0.5\n", "b": None}}, size_wh=(64, 48))
    ds = load_yolo_dataset(yaml_path, "val")
    assert ds.names == {0: "person", 1: "car"}
    assert [p.stem for p in ds.image_paths] == ["a", "b"]
    np.testing.assert_array_equal(ds.image_hw, [[48, 64], [48, 64]])
    np.testing.assert_allclose(ds.truths[0].xyxy, [[16, 12, 48, 36], [0, 0, 32, 24]])
    np.testing.assert_array_equal(ds.truths[0].class_id, [0, 1])
    assert len(ds.truths[1]) == 0  # no label file: background image
    assert ds.num_instances == 2


def test_segment_polygon_becomes_its_box(write_dataset) -> None:
    ds = load_yolo_dataset(write_dataset({"val": {"a": "1 0.25 0.5 0.75 0.25 0.5 0.75\n"}}, size_wh=(100, 100)))
    np.testing.assert_allclose(ds.truths[0].xyxy, [[25, 25, 75, 75]])


def test_relative_path_is_relative_to_yaml_and_image_list_txt(write_dataset, tmp_path: Path) -> None:
    yaml_path = write_dataset({"val": {"a": "0 0.5 0.5 0.2 0.2\n"}})
    (yaml_path.parent / "val.txt").write_text("./images/val/a.jpg\n")
    data = yaml.safe_load(yaml_path.read_text())
    data.update(path=".", val="val.txt")
    yaml_path.write_text(yaml.safe_dump(data))
    ds = load_yolo_dataset(yaml_path, "val")
    assert len(ds) == 1 and ds.num_instances == 1


def test_label_path_replaces_last_images_folder() -> None:
    assert label_path_for(Path("/d/images/x/images/val/a.jpg")) == Path("/d/images/x/labels/val/a.txt")


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ({"a": "0 0.5 0.5 0.2\n"}, r"a\.txt:1: expected 'class cx cy w h'"),
        ({"a": "0 0.5 0.5 0.2 0.2\n0 0.5 abc 0.2 0.2\n"}, r"a\.txt:2: not a number"),
        ({"a": "2 0.5 0.5 0.2 0.2\n"}, r"a\.txt:1: class id 2 out of range 0\.\.1"),
        ({"a": "-1 0.5 0.5 0.2 0.2\n"}, r"a\.txt:1: class id -1 out of range"),
        ({"a": "0.5 0.5 0.5 0.2 0.2\n"}, r"a\.txt:1: class id 0\.5 out of range"),
        ({"a": "0 1.5 0.5 0.2 0.2\n"}, r"a\.txt:1: coordinates must be normalised"),
        ({"a": "0 0.5 0.5 0 0.2\n"}, r"a\.txt:1: box has no area"),
    ],
)
def test_bad_label_lines_name_file_and_line(write_dataset, labels, message) -> None:
    with pytest.raises(InvalidInputError, match=message):
        load_yolo_dataset(write_dataset({"val": labels}), "val")


def test_label_without_image_is_a_missing_image(write_dataset) -> None:
    yaml_path = write_dataset({"val": {"a": "0 0.5 0.5 0.2 0.2\n", "b": "0 0.5 0.5 0.2 0.2\n"}})
    (yaml_path.parent / "images" / "val" / "b.jpg").unlink()
    with pytest.raises(InvalidInputError, match=r"b\.txt has no image"):
        load_yolo_dataset(yaml_path, "val")


def test_image_list_naming_missing_image(write_dataset) -> None:
    yaml_path = write_dataset({"val": {"a": "0 0.5 0.5 0.2 0.2\n"}})
    (yaml_path.parent / "val.txt").write_text("./images/val/a.jpg\n./images/val/gone.jpg\n")
    data = yaml.safe_load(yaml_path.read_text()) | {"val": "val.txt"}
    yaml_path.write_text(yaml.safe_dump(data))
    with pytest.raises(InvalidInputError, match=r"val\.txt:2: image .*gone\.jpg does not exist"):
        load_yolo_dataset(yaml_path, "val")


def test_missing_images_folder(write_dataset) -> None:
    yaml_path = write_dataset({"val": {"a": None}}, extra={"val": "images/nope"})
    with pytest.raises(InvalidInputError, match=r"val images .*nope .*do not exist"):
        load_yolo_dataset(yaml_path, "val")


def test_missing_labels_folder(write_dataset) -> None:
    yaml_path = write_dataset({"val": {"a": None}})
    (yaml_path.parent / "labels" / "val").rmdir()
    with pytest.raises(InvalidInputError, match="has no labels folder"):
        load_yolo_dataset(yaml_path, "val")


def test_empty_split(write_dataset) -> None:
    yaml_path = write_dataset({"val": {}})
    with pytest.raises(InvalidInputError, match="val split of .* is empty"):
        load_yolo_dataset(yaml_path, "val")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"names": None}, "has no 'names' key"),
        ({"val": None}, "has no 'val' key"),
        ({"nc": 3}, "nc is 3 but 'names' lists 2 classes"),
        ({"names": {0: "a", 2: "b"}}, "'names' ids must be 0..1 without gaps"),
    ],
)
def test_bad_data_yaml(write_dataset, edit, message) -> None:
    yaml_path = write_dataset({"val": {"a": None}})
    data = yaml.safe_load(yaml_path.read_text())
    for k, v in edit.items():
        if v is None:
            data.pop(k)
        else:
            data[k] = v
    yaml_path.write_text(yaml.safe_dump(data))
    with pytest.raises(InvalidInputError, match=message):
        load_yolo_dataset(yaml_path, "val")


def test_missing_yaml_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"data set file .*nope\.yaml does not exist"):
        load_yolo_dataset(tmp_path / "nope.yaml")
