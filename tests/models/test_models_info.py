"""`ModelInfo` and the one image-size check: parsing sizes, metadata and ONNX shapes."""

from __future__ import annotations

import pytest

from campusguard.errors import InvalidInputError, ModelLoadError
from campusguard.models.info import check_imgsz, imgsz_from_metadata, info_from_onnx, names_from_metadata


@pytest.mark.parametrize(
    "value, expected",
    [(640, (640, 640)), ("384,640", (384, 640)), ((320, 416), (320, 416)), ("640x640", (640, 640)), ([64], (64, 64))],
)
def test_check_imgsz(value, expected):
    assert check_imgsz(value) == expected


@pytest.mark.parametrize("value", [0, -32, 100, "abc", (640, 100), "1,2,3"])
def test_check_imgsz_rejects(value):
    with pytest.raises(InvalidInputError, match="multiple of 32|not an integer"):
        check_imgsz(value)


@pytest.mark.parametrize(
    ("value", "kwargs", "message"),
    [
        (
            32,
            {"name": "--imgsz", "min_size": 64, "max_size": 4096},
            r"--imgsz 32 must be a positive multiple of 32 in 64\.\.4096",
        ),
        (4128, {"min_size": 64, "max_size": 4096}, r"in 64\.\.4096"),
        (48, {"stride": 16, "name": "size"}, None),
    ],
)
def test_check_imgsz_bounds_and_name(value, kwargs, message):
    if message is None:
        assert check_imgsz(value, **kwargs) == (48, 48)
        return
    with pytest.raises(InvalidInputError, match=message):
        check_imgsz(value, **kwargs)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("[320, 320]", (320, 320)),
        ("[192, 320]", (192, 320)),
        ("416", (416, 416)),
        (320, (320, 320)),
        ([192, 320], (192, 320)),
        (None, None),
        ("", None),
        ("big", None),
        ("[1, 2, 3]", None),
        ("[0, 320]", None),
    ],
)
def test_imgsz_from_metadata(value, expected):
    assert imgsz_from_metadata(value) == expected


@pytest.mark.parametrize(
    ("raw", "nc", "expected"),
    [
        ("{0: 'person', 1: 'car'}", 2, {0: "person", 1: "car"}),
        (["a", "b"], None, {0: "a", 1: "b"}),
        ("{0: 'person'}", 3, {0: "person", 1: "class1", 2: "class2"}),
        (None, 2, {0: "class0", 1: "class1"}),
        ("not python", None, {}),
    ],
)
def test_names_from_metadata(raw, nc, expected):
    assert names_from_metadata(raw, nc) == expected


def test_info_from_onnx_static_and_dynamic():
    meta = {"names": "{0: 'a', 1: 'b'}", "imgsz": "[320, 320]", "stride": "32", "task": "detect"}
    static = info_from_onnx(meta, [1, 3, 256, 256], [1, 6, 1344], source="m.onnx")
    assert (static.input_hw, static.imgsz_hw, static.batch, static.dynamic) == ((256, 256), (256, 256), 1, False)
    assert static.names == {0: "a", 1: "b"} and "names" not in static.extra and static.task == "detect"
    dynamic = info_from_onnx(meta, ["batch", 3, "height", "width"], ["batch", 6, "anchors"], input_fp16=True)
    assert (dynamic.input_hw, dynamic.imgsz_hw, dynamic.batch, dynamic.dynamic) == (None, (320, 320), None, True)
    assert dynamic.precision == "fp16"


@pytest.mark.parametrize(
    ("input_shape", "output_shape", "message"),
    [([1, 1, 64, 64], [1, 6, 10], "not an image detector"), ([1, 3, 64, 64], [1, 10], "not a YOLO detector")],
)
def test_info_from_onnx_rejects(input_shape, output_shape, message):
    with pytest.raises(ModelLoadError, match=message):
        info_from_onnx({}, input_shape, output_shape, source="x.onnx")
