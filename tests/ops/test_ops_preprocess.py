import numpy as np
import pytest

from campusguard.errors import InvalidInputError
from campusguard.ops.preprocess import fit_shape, letterbox, make_batch, to_bgr_uint8


def test_letterbox_centres_and_pads_with_114():
    img = np.full((720, 1280, 3), 200, np.uint8)
    out, meta = letterbox(img, (640, 640))
    assert out.shape == (640, 640, 3)
    assert meta.ratio == pytest.approx(0.5)
    assert meta.pad_xy == (0, 140)
    assert (out[:140] == 114).all() and (out[-140:] == 114).all()
    assert (out[140:500] == 200).all()


def test_letterbox_matches_ultralytics():
    pytest.importorskip("ultralytics")
    from ultralytics.data.augment import LetterBox

    rng = np.random.default_rng(0)
    for h, w in [(1080, 810), (720, 1280), (333, 517), (640, 640)]:
        img = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
        ours, _ = letterbox(img, (640, 640))
        theirs = LetterBox((640, 640), auto=False, stride=32)(image=img)
        np.testing.assert_array_equal(ours, theirs)
        rect = fit_shape((h, w), (640, 640))
        ours_r, _ = letterbox(img, rect)
        theirs_r = LetterBox((640, 640), auto=True, stride=32)(image=img)
        np.testing.assert_array_equal(ours_r, theirs_r)


def test_letterbox_of_a_crop_view_and_of_an_unresized_frame_matches_resize_then_pad():
    rng = np.random.default_rng(1)
    frame = rng.integers(0, 255, (360, 640, 3), dtype=np.uint8)

    def reference(img: np.ndarray, hw: tuple[int, int], size_wh: tuple[int, int], tblr: tuple[int, ...]) -> np.ndarray:
        import cv2

        resized = cv2.resize(np.ascontiguousarray(img), size_wh, interpolation=cv2.INTER_LINEAR)
        return cv2.copyMakeBorder(resized, *tblr, cv2.BORDER_CONSTANT, value=(114, 114, 114))

    crop = frame[40:340, 100:400]  # a motion-gate crop: a strided view
    out, meta = letterbox(crop, (320, 320))
    np.testing.assert_array_equal(out, reference(crop, (320, 320), (320, 320), (0, 0, 0, 0)))
    out, meta = letterbox(frame[:, :600], (480, 480))  # 360x600 -> 288x480 inside 480x480
    np.testing.assert_array_equal(out, reference(frame[:, :600], (480, 480), (480, 288), (96, 96, 0, 0)))
    small = frame[:64, :96]  # no scale-up: padded only
    out, meta = letterbox(small, (96, 128), scaleup=False)
    assert meta.ratio == 1.0 and out.shape == (96, 128, 3)
    np.testing.assert_array_equal(out[16:80, 16:112], small)
    assert (out[:16] == 114).all() and (out[:, :16] == 114).all()


def test_fit_shape_for_16_9_is_384x640():
    assert fit_shape((720, 1280), (640, 640)) == (384, 640)
    assert fit_shape((1080, 810), (640, 640)) == (640, 480)


def test_make_batch_is_rgb_chw_0_1():
    img = np.zeros((4, 4, 3), np.uint8)
    img[..., 0] = 255  # blue in BGR
    batch = make_batch([img, img])
    assert batch.shape == (2, 3, 4, 4) and batch.dtype == np.float32
    assert (batch[:, 2] == 1.0).all() and (batch[:, 0] == 0.0).all()
    again = make_batch([img, img], out=batch)
    assert again is batch


@pytest.mark.parametrize(
    "image",
    [
        np.full((8, 8), 128, np.uint8),
        np.full((8, 8, 1), 128, np.uint8),
        np.full((8, 8, 4), 128, np.uint8),
        np.full((8, 8, 3), 128 * 256, np.uint16),
        np.full((8, 8, 3), 128 / 255, np.float32),
    ],
)
def test_to_bgr_uint8_converts(image):
    out = to_bgr_uint8(image)
    assert out.shape == (8, 8, 3) and out.dtype == np.uint8
    assert abs(int(out[0, 0, 0]) - 128) <= 1


@pytest.mark.parametrize(
    "bad", [np.zeros((0, 0, 3), np.uint8), np.zeros((4, 4, 2), np.uint8), "x", np.zeros(5, np.uint8)]
)
def test_to_bgr_uint8_rejects(bad):
    with pytest.raises(InvalidInputError):
        to_bgr_uint8(bad)
