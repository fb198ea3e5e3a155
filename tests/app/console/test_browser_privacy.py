"""Blur by role in a real headless Chromium: a viewer's camera tile (live MJPEG) shows the scene's
person blurred, an admin's shows it sharp; the masked strip is black for both.

The console serves a looped scene video like `fakes_watch.write_scene` whose red 'person' is
striped (the detail a blur must remove: a flat rectangle has none) with ``privacy: {blur:
persons}`` and a mask over the top 30 rows. Measured on element screenshots of the tile's live
image: the stripes' edges inside the person (gone when blurred), and the masked strip.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (dev extra) is not installed")

from fakes_console import (  # noqa: E402 - after the skips
    PASSWORDS,
    LiveServer,
    console_yaml,
    served_console,
)
from fakes_watch import BLUE, person_box  # noqa: E402

pytestmark = pytest.mark.slow
PRIVACY = (
    "    privacy:\n      blur: persons\n      masks: [{name: strip, polygon: [[0, 0], [320, 0], [320, 30], [0, 30]]}]\n"
)


def write_striped_scene(path: Path, n: int = 60, fps: float = 10.0) -> Path:
    """`fakes_watch.write_scene` with a striped person: rows of red 250 and 150 (BGR), 3 px each."""
    w, h = 320, 180
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), fps, (w, h))
    for i in range(n):
        img = np.full((h, w, 3), 30, np.uint8)
        cv2.rectangle(img, (20, 150), (60, 170), BLUE, -1)
        box = person_box(i)
        if box is not None:
            x1, y1, x2, y2 = box
            rows = np.arange(y1, y2 + 1)
            img[y1 : y2 + 1, x1 : x2 + 1] = 0
            img[y1 : y2 + 1, x1 : x2 + 1, 2] = np.where((rows - y1) % 6 < 3, 250, 150)[:, None]
        writer.write(img)
    writer.release()
    return path


@pytest.fixture
def blurred_server(tmp_path: Path) -> Iterator[LiveServer]:
    console_video = write_striped_scene(tmp_path / "striped.avi")
    config = tmp_path / "watch.yaml"
    config.write_text(
        console_yaml(console_video, tmp_path, live=True).replace("    zones:\n", PRIVACY + "    zones:\n", 1)
    )
    yield from served_console(config, tmp_path)


def _person_rows(image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows the person walks along (y 103..137 of 180, inside its box outline): its red pixels,
    and where the red steps by more than 40 over 3 rows (its stripes)."""
    h = image.shape[0]
    band = image[round(h * 103 / 180) : round(h * 137 / 180)].astype(int)
    b, g, r = band[:, :, 0], band[:, :, 1], band[:, :, 2]
    red = (r > 120) & (g < 60) & (b < 60)
    return red, red[:-3] & red[3:] & (np.abs(r[3:] - r[:-3]) > 40)


def _stripe_edges(image: np.ndarray) -> int:
    return int(np.count_nonzero(_person_rows(image)[1]))


def _red(image: np.ndarray) -> int:
    return int(np.count_nonzero(_person_rows(image)[0]))


def _tile_shots(browser: Any, base: str, user: str, out: Path, n: int = 14) -> list[np.ndarray]:
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto(f"{base}/login?next=/")
        page.fill("#username", user)
        page.fill("#password", PASSWORDS[user])
        page.click("#login-form button[type=submit]")
        page.wait_for_url(f"{base}/")
        page.wait_for_function(
            "() => { const img = document.querySelector('.tile[data-camera=cam1] img.frame');"
            " return img && img.complete && img.naturalWidth > 0 }"
        )
        img = page.locator('.tile[data-camera="cam1"] img.frame')
        shots = []
        for i in range(n):  # the 6 s loop shows the person for 3.7 s: shots across a whole loop
            path = out / f"{user}-{i}.png"
            img.screenshot(path=str(path))
            shots.append(cv2.imread(str(path)))
            time.sleep(0.4)
        return shots
    finally:
        context.close()


def test_a_viewers_live_tile_is_blurred_and_an_admins_sharp(blurred_server: LiveServer, tmp_path: Path) -> None:
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        try:
            admin = _tile_shots(browser, blurred_server.url, "ada", tmp_path)
            viewer = _tile_shots(browser, blurred_server.url, "vera", tmp_path)
        finally:
            browser.close()
    sharp = max(_stripe_edges(s) for s in admin)
    blurred = max(_stripe_edges(s) for s in viewer)
    assert sharp > 200, "the admin's tile never showed the person's stripes"
    assert max(_red(s) for s in viewer) > 1000, "the viewer's tile never showed the (blurred) person"
    assert blurred < 0.1 * sharp, (sharp, blurred)
    for shot in admin + viewer:  # the masked strip (top 30 of 180 rows), clear of the overlay: the header
        h, w = shot.shape[:2]  # text, the east zone's outline and name, the page's "Live" badge
        strip = shot[round(h * 12 / 180) : round(h * 27 / 180), round(w * 200 / 320) : round(w * 290 / 320)]
        assert int(strip.max()) <= 12, "the masked strip shows something"
