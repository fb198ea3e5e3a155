"""Before/after of `letterbox` on demo frames, interleaved: resize then `copyMakeBorder` (before) against
resizing straight into the padded input (after, `campusguard.ops.preprocess.letterbox`).

Both give the same bytes (checked on every frame). CPU time per call (`time.process_time`), rounds
alternating before/after so a shared machine slows both alike; the median of the per-round ratios is
the figure to read.

    python benchmarks/letterbox_ab.py --video DEMO/campus-seed12.mp4 --input-hw 288 480
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import cv2
import numpy as np

from campusguard.ops.preprocess import LetterboxMeta, letterbox, letterbox_plan


def letterbox_before(
    image: np.ndarray, input_hw: tuple[int, int], pad_value: int = 114
) -> tuple[np.ndarray, LetterboxMeta]:
    """`letterbox` as it was: resize, then pad with a second full-size copy."""
    h, w = image.shape[:2]
    plan = letterbox_plan((h, w), input_hw, True)
    if (w, h) != plan.resized_wh:
        image = cv2.resize(image, plan.resized_wh, interpolation=cv2.INTER_LINEAR)
    top, bottom, left, right = plan.pad_tblr
    if top or bottom or left or right:
        image = cv2.copyMakeBorder(image, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(pad_value,) * 3)
    return image, plan.meta


def per_call_ms(
    fn: Callable[[np.ndarray, tuple[int, int]], object], frames: list[np.ndarray], hw: tuple[int, int]
) -> float:
    c0 = time.process_time()
    for f in frames:
        fn(f, hw)
    return (time.process_time() - c0) * 1000 / len(frames)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--video", required=True)
    ap.add_argument("--input-hw", type=int, nargs=2, default=(288, 480))
    ap.add_argument("--frames", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    cap = cv2.VideoCapture(args.video)
    frames = []
    while len(frames) < args.frames:
        ok, f = cap.read()
        if not ok:
            break
        frames.append(f)
    hw = (args.input_hw[0], args.input_hw[1])
    assert all(np.array_equal(letterbox(f, hw)[0], letterbox_before(f, hw)[0]) for f in frames), "outputs differ"
    before, after = [], []
    for r in range(args.rounds):
        pair = [(letterbox_before, before), (letterbox, after)]
        for fn, out in pair if r % 2 == 0 else pair[::-1]:
            out.append(per_call_ms(fn, frames, hw))
    ratios = [b / a for b, a in zip(before, after, strict=True)]
    print(
        f"letterbox {frames[0].shape[1]}x{frames[0].shape[0]} -> {hw[1]}x{hw[0]}, {len(frames)} frames x {args.rounds} "
        f"rounds: before {statistics.median(before):.3f} ms/call, after {statistics.median(after):.3f} ms/call "
        f"(CPU), before/after {statistics.median(ratios):.2f}x (per round: {', '.join(f'{x:.2f}' for x in ratios)}); "
        "outputs identical"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
