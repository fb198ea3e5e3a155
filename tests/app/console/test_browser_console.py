"""The console's pages in a real headless Chromium (Debian's, driven by Playwright) against a real
uvicorn serving a started `ConsoleRuntime` on a looped synthetic video (`live_server`).

Covered: a wrong password fails and the right one logs in; a camera tile shows a frame; an
incident raised by the pipeline appears in the timeline within 2 s without a reload; acknowledge
and resolve are recorded with the user; a zone drawn in the editor is applied (an intrusion in it
raises an event); a viewer cannot edit zones. Every page is screenshotted at 1366x768 and at tablet
width (768x1024) into the test's tmp folder, and also into ``$CAMPUSGUARD_SCREENSHOTS`` when set
(that is how ``docs/screenshots/`` is refreshed).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} is not installed (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (dev extra) is not installed")

from fakes_console import PASSWORDS  # noqa: E402 - after the skips

pytestmark = pytest.mark.slow
LAPTOP = {"width": 1366, "height": 768}
TABLET = {"width": 768, "height": 1024}
TOP_STRIP = [[160, 0], [320, 0], [320, 30], [160, 30]]  # nobody walks there (the person is at y 100..140)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        yield chromium
        chromium.close()


class Shots:
    """Screenshots of pages: into the test's tmp folder and, when set, ``$CAMPUSGUARD_SCREENSHOTS``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.publish = os.environ.get("CAMPUSGUARD_SCREENSHOTS")

    def take(self, page: Any, name: str, *, full_page: bool = False) -> Path:
        path = self.folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=full_page)
        if self.publish:
            Path(self.publish).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(self.publish) / path.name)
        return path


@pytest.fixture
def shots(tmp_path: Path) -> Shots:
    folder = tmp_path / "screenshots"
    folder.mkdir()
    return Shots(folder)


@pytest.fixture
def open_page(browser: Any) -> Iterator[Any]:
    """``open_page(viewport)``: a fresh browser context (own cookies); page errors fail the test."""
    contexts: list[Any] = []
    errors: list[str] = []

    def make(viewport: dict[str, int] = LAPTOP) -> Any:
        context = browser.new_context(viewport=viewport)
        contexts.append(context)
        page = context.new_page()
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.set_default_timeout(15_000)
        return page

    yield make
    for context in contexts:
        context.close()
    assert not errors, f"JavaScript errors on the pages: {errors}"


def login(page: Any, base: str, name: str, *, next_path: str = "/") -> None:
    page.goto(f"{base}/login?next={next_path}")
    page.fill("#username", name)
    page.fill("#password", PASSWORDS[name])
    page.click("#login-form button[type=submit]")
    page.wait_for_url(f"{base}{next_path}")


def wait_until(predicate: Any, timeout_s: float = 20.0, step_s: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step_s)
    return predicate()


def intrusion_ids(store: Any) -> set[str]:
    from campusguard.app.events.records import EventFilter

    records, _ = store.query_records(EventFilter(kind="intrusion"), limit=500)
    return {r.event.event_id for r in records}


def test_wrong_password_fails_and_right_one_logs_in(live_server, open_page, shots):
    page = open_page()
    page.goto(f"{live_server.url}/events")
    page.wait_for_url(f"{live_server.url}/login?next=/events")  # a page without a session goes to login
    shots.take(page, "login")
    page.fill("#username", "ada")
    page.fill("#password", "not-the-password")
    page.click("#login-form button[type=submit]")
    error = page.locator("#login-error")
    error.wait_for(state="visible")
    assert "Wrong user name or password" in error.inner_text()
    assert page.url.startswith(f"{live_server.url}/login")
    assert not [c for c in page.context.cookies() if c["name"] == "cg_session"]

    page.fill("#password", PASSWORDS["ada"])
    page.click("#login-form button[type=submit]")
    page.wait_for_url(f"{live_server.url}/events")  # back where the user was going
    assert page.locator("nav.top .who").inner_text().startswith("ada")
    session = [c for c in page.context.cookies() if c["name"] == "cg_session"]
    assert session and session[0]["httpOnly"] and session[0]["sameSite"] == "Strict"
    tablet = open_page(TABLET)
    tablet.goto(f"{live_server.url}/login")
    shots.take(tablet, "login-tablet")


def test_camera_tile_shows_a_frame(live_server, open_page, shots):
    for viewport, suffix in ((LAPTOP, ""), (TABLET, "-tablet")):
        page = open_page(viewport)
        login(page, live_server.url, "ada")
        tile = page.locator('.tile[data-camera="cam1"]')
        tile.locator(".badge.cam-live").wait_for()
        page.wait_for_function(
            "() => { const img = document.querySelector('.tile[data-camera=cam1] img.frame');"
            " return img && img.complete && img.naturalWidth > 0 }"
        )
        size = tile.locator("img.frame").evaluate("img => [img.naturalWidth, img.naturalHeight]")
        assert size == [320, 180]  # the camera's frame, annotated
        assert "fps in" in tile.locator(".stats").inner_text()
        page.wait_for_function("() => document.getElementById('disk-use').textContent.startsWith('Disk: ')")
        assert " free of " in page.locator("#disk-use").inner_text()  # the data volume's disk line
        time.sleep(0.5)  # a few more MJPEG parts, so the screenshot shows a moving scene
        shots.take(page, f"wall{suffix}")


def test_new_incident_appears_in_the_timeline_within_2s_without_reload(live_server, open_page, shots):
    runtime = live_server.console.runtime
    page = open_page()
    login(page, live_server.url, "ada", next_path="/events")
    page.locator("#live-state.cam-live").wait_for()  # the event stream is connected
    page.evaluate("() => { window.__same_document = true }")
    shown = set(page.locator(".timeline li[data-id]").evaluate_all("items => items.map(li => li.dataset.id)"))

    subscription = runtime.subscribe_events()
    try:
        deadline = time.monotonic() + 30
        new_id = None
        while new_id is None and time.monotonic() < deadline:
            item = subscription.get(1.0)  # handed out after the store committed it
            if item is not None and item["id"] not in shown:
                committed_at = time.monotonic()
                new_id = item["id"]
    finally:
        subscription.close()
    assert new_id is not None, "the pipeline raised no new incident in 30 s"
    page.locator(f'.timeline li[data-id="{new_id}"]').wait_for(timeout=2000)
    elapsed = time.monotonic() - committed_at
    assert elapsed < 2.0, f"shown {elapsed:.2f} s after the commit"
    assert page.evaluate("() => window.__same_document === true")  # no reload happened
    assert runtime.store.get_record(new_id) is not None
    shots.take(page, "events", full_page=False)
    tablet = open_page(TABLET)
    login(tablet, live_server.url, "ada", next_path="/events")
    tablet.locator(".timeline li[data-id]").first.wait_for()
    shots.take(tablet, "events-tablet")


def test_acknowledge_and_resolve_are_recorded_with_the_user(live_server, open_page, shots):
    store = live_server.console.runtime.store
    wait_until(lambda: intrusion_ids(store), 30)
    page = open_page()
    login(page, live_server.url, "otto", next_path="/events")  # an operator
    item = page.locator(".timeline li[data-state=open]").first
    item.wait_for()
    event_id = item.get_attribute("data-id")
    item.locator("button.ack").click()
    page.locator(f'.timeline li[data-id="{event_id}"][data-state=acknowledged]').wait_for()
    record = store.get_record(event_id)
    assert record.state == "acknowledged" and record.acknowledged_by == "otto" and record.acknowledged_at
    entries, _ = live_server.console.users.audit_entries(limit=20)
    assert any(e.user == "otto" and e.action == "event.acknowledge" and e.target == event_id for e in entries)

    page.goto(f"{live_server.url}/events/{event_id}")
    page.locator("#event").wait_for()
    page.wait_for_function("() => !document.getElementById('clip').hidden", timeout=20_000)  # the clip is written
    page.fill("#note", "checked on camera; a student, sent back")
    page.click("#resolve")
    page.locator("#event-state.state-resolved").wait_for()
    record = store.get_record(event_id)
    assert (record.state, record.resolved_by, record.note) == (
        "resolved",
        "otto",
        "checked on camera; a student, sent back",
    )
    assert "otto" in page.locator("#facts").inner_text()
    assert page.locator("#clip").evaluate("v => v.readyState >= 1 && v.duration > 0")  # Chromium plays the MP4
    page.locator("#clip").evaluate(
        "v => new Promise(done => { v.addEventListener('seeked', done, {once: true}); v.currentTime = 3; })"
    )
    page.mouse.move(1, 1)  # the video's controls fade out
    time.sleep(2.5)
    shots.take(page, "event")
    tablet = open_page(TABLET)
    login(tablet, live_server.url, "otto", next_path=f"/events/{event_id}")
    tablet.locator("#event").wait_for()
    shots.take(tablet, "event-tablet", full_page=True)


def _click_frame(page: Any, xy: tuple[float, float], frame_wh: tuple[int, int] = (320, 180)) -> None:
    box = page.locator("#overlay").bounding_box()
    page.mouse.click(box["x"] + xy[0] / frame_wh[0] * box["width"], box["y"] + xy[1] / frame_wh[1] * box["height"])


def _frame_to_page(page: Any, xy: tuple[float, float], frame_wh: tuple[int, int] = (320, 180)) -> tuple[float, float]:
    box = page.locator("#overlay").bounding_box()
    return box["x"] + xy[0] / frame_wh[0] * box["width"], box["y"] + xy[1] / frame_wh[1] * box["height"]


def test_zone_drawn_in_the_editor_is_applied(live_server, open_page, shots):
    """Move the intrusion rule's zone where nobody walks, then delete it (with its rule) in the editor,
    draw it again over the person's path and attach an intrusion rule to it: after Save the rule is in
    the YAML and an intrusion is raised in the drawn zone."""
    runtime = live_server.console.runtime
    runtime.put_zones(
        "cam1", {"zones": [{"name": "east", "polygon": TOP_STRIP}, runtime.get_zones("cam1")["zones"][1]]}
    )
    moved_at = time.monotonic()
    time.sleep(0.5)
    before = intrusion_ids(runtime.store)

    page = open_page()
    login(page, live_server.url, "ada", next_path="/zones/cam1")
    page.locator("#shape-list button", has_text="east").click()
    page.click("#delete-shape")
    page.click("#add-zone")
    page.fill("#shape-name", "east")
    for xy in ((170, 60), (312, 60), (312, 170), (170, 170), (240, 20)):
        _click_frame(page, xy)
    assert page.locator("#overlay g.selected circle.handle").count() == 5
    page.locator("#overlay g.selected circle.handle").nth(4).dblclick()  # delete the fifth point again
    assert page.locator("#overlay g.selected circle.handle").count() == 4
    start = _frame_to_page(page, (170, 60))  # drag the first corner up to y=50
    page.mouse.move(*start)
    page.mouse.down()
    page.mouse.move(start[0], start[1] - 5, steps=3)
    page.mouse.move(*_frame_to_page(page, (170, 50)), steps=3)
    page.mouse.up()
    page.click("#done-drawing")
    page.select_option("#rule-kind", "intrusion")
    page.click("#add-rule-button")
    rule = page.locator("#rule-list details.rule").first
    rule.locator("input[name=classes]").fill("person")
    rule.locator("input[name=min_seconds]").fill("1")
    rule.locator("input[name=min_seconds]").press("Tab")  # change events
    shots.take(page, "zones")

    # the rule watched the top strip for at least one loop of the video (6 s): no intrusion there
    time.sleep(max(0.0, 6.5 - (time.monotonic() - moved_at)))
    assert intrusion_ids(runtime.store) == before
    page.click("#save")
    page.wait_for_function("() => document.getElementById('zones-status').textContent.startsWith('Saved at')")
    saved_ids = intrusion_ids(runtime.store)
    east = next(z for z in runtime.get_zones("cam1")["zones"] if z["name"] == "east")
    polygon = [[round(x), round(y)] for x, y in east["polygon"]]
    assert polygon == [[170, 50], [312, 60], [312, 170], [170, 170]]
    assert "east" in live_server.console.config.read_text() and Path(f"{live_server.console.config}.bak").exists()
    rules = yaml.safe_load(live_server.console.config.read_text())["cameras"][0]["rules"]
    assert {"kind": "intrusion", "zone": "east", "min_seconds": 1.0} in [
        {k: r[k] for k in ("kind", "zone", "min_seconds") if k in r} for r in rules
    ]
    assert [r["zone"] for r in rules if r["kind"] == "intrusion"] == ["east"]  # the deleted zone's rule went with it

    new = wait_until(lambda: intrusion_ids(runtime.store) - saved_ids, 20)
    assert new, "no intrusion in the drawn zone within 20 s"
    record = runtime.store.get_record(next(iter(new)))
    assert (record.event.zone, record.event.rule_kind) == ("east", "intrusion")
    tablet = open_page(TABLET)
    login(tablet, live_server.url, "ada", next_path="/zones/cam1")
    tablet.locator("#shape-list button", has_text="east").wait_for()
    shots.take(tablet, "zones-tablet", full_page=True)


def test_viewer_cannot_edit_zones(live_server, open_page, shots):
    config = live_server.console.config
    before = config.read_text()
    page = open_page()
    login(page, live_server.url, "vera", next_path="/zones/cam1")
    page.locator("#shape-list button", has_text="east").wait_for()
    assert page.locator("#readonly-note").is_visible()
    assert not page.locator("#save").is_visible() and not page.locator("#add-zone").is_visible()
    handles = page.locator("#overlay circle.handle").count()
    _click_frame(page, (100, 100))
    assert page.locator("#overlay circle.handle").count() == handles  # clicks do not add points
    # even a hand-made request with her session and CSRF token is refused
    status = page.evaluate(
        """async () => {
            const csrf = document.cookie.split('; ').find(c => c.startsWith('cg_csrf=')).split('=')[1];
            const r = await fetch('/api/v1/cameras/cam1/zones', {method: 'PUT',
                headers: {'Content-Type': 'application/json', 'X-CSRF-Token': csrf},
                body: JSON.stringify({zones: [], lines: []})});
            return r.status;
        }"""
    )
    assert status == 403
    assert config.read_text() == before
    assert "Users" not in page.locator("nav.top").inner_text()
    response = page.goto(f"{live_server.url}/users")
    assert response.status == 403


def test_users_page_for_admins(live_server, open_page, shots):
    for viewport, suffix in ((LAPTOP, ""), (TABLET, "-tablet")):
        page = open_page(viewport)
        login(page, live_server.url, "ada", next_path="/users")
        page.locator('#user-rows tr[data-user="vera"]').wait_for()
        page.locator('main a[href="/audit"]').wait_for()  # the audit log has its own page
        if not suffix:
            page.fill("#add-user input[name=name]", "nadia")
            page.select_option("#add-user select[name=role]", "operator")
            page.fill("#add-user input[name=password]", "operator-pass-2")
            page.click("#add-user button[type=submit]")
            page.locator('#user-rows tr[data-user="nadia"]').wait_for()
            assert live_server.console.users.get_user("nadia").role == "operator"
        shots.take(page, f"users{suffix}", full_page=True)
