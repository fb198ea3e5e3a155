"""Accessibility of every console page in a real headless Chromium (`test_browser_console`'s fixtures):
axe-core (vendored, ``vendor/axe.min.js``) finds no serious or critical WCAG 2.2 A/AA violation on the
login, wall, incidents, incident, zones editor, camera health, users and audit pages; thumbnails and checkboxes are
labelled, each checkbox differently; the zones editor works from the keyboard alone (select a shape,
move a vertex with the arrow keys, add and delete points, save).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import test_browser_console as ui  # its fixtures (Chromium, pages, screenshots) and helpers

browser, open_page, shots = ui.browser, ui.open_page, ui.shots  # fixtures, used by name
LAPTOP, login, wait_until = ui.LAPTOP, ui.login, ui.wait_until

pytestmark = pytest.mark.slow
AXE = (Path(__file__).parent / "vendor" / "axe.min.js").read_text(encoding="utf-8")
WCAG = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]


def serious_violations(page: Any) -> list[dict[str, Any]]:
    """axe-core's serious and critical WCAG 2.2 A/AA violations on the page as it is now."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(AXE)  # over the DevTools protocol: the page's CSP (no inline script) stays on
    violations = page.evaluate(
        """async (tags) => {
            const result = await window.axe.run(document, {runOnly: {type: "tag", values: tags}});
            return result.violations.map((v) => ({
                id: v.id, impact: v.impact, help: v.help,
                nodes: v.nodes.slice(0, 5).map((n) => n.target.join(" ")),
            }));
        }""",
        WCAG,
    )
    return [v for v in violations if v["impact"] in ("serious", "critical")]


def test_every_page_has_no_serious_accessibility_violation(live_server, open_page, make_event):
    console = live_server.console
    store = console.runtime.store
    for i in range(3):
        store.add(make_event(event_id=f"a11y{i}", camera_id="cam1", rule_name="gate", zone="east", start_s=i))
    base = live_server.url
    found: dict[str, list[dict[str, Any]]] = {}
    page = open_page()
    page.goto(f"{base}/login")
    found["login"] = serious_violations(page)
    page.fill("#username", "ada")
    page.fill("#password", "not-the-password")
    page.click("#login-form button[type=submit]")
    page.locator("#login-error").wait_for()
    found["login (wrong password)"] = serious_violations(page)
    login(page, base, "ada")
    page.locator(".tile img").first.wait_for()
    found["wall"] = serious_violations(page)
    page.goto(f"{base}/events")
    page.locator(".timeline li[data-id] input.pick").nth(2).wait_for()
    wait_until(lambda: page.locator(".timeline li[data-id] .thumb img").count() > 0, 30)
    found["events"] = serious_violations(page)
    labels = page.eval_on_selector_all(
        "input[type=checkbox]",
        "els => els.map((e) => e.labels.length ? e.labels[0].textContent : e.getAttribute('aria-label'))",
    )
    assert all(labels) and len(set(labels)) == len(labels), labels  # every checkbox named, each differently
    names = page.eval_on_selector_all(".timeline a.thumb", "els => els.map((e) => e.querySelector('img')?.alt)")
    assert names and all(n.startswith("Snapshot of ") for n in names), names  # every thumbnail link named
    page.goto(f"{base}/events/a11y0")
    page.locator("#facts dt").first.wait_for()
    found["event"] = serious_violations(page)
    page.goto(f"{base}/zones/cam1")
    page.locator("#shape-list button").first.wait_for()
    found["zones"] = serious_violations(page)
    page.goto(f"{base}/health")
    page.locator(".health-card h3").first.wait_for()
    found["health"] = serious_violations(page)
    page.goto(f"{base}/users")
    page.locator('#user-rows tr[data-user="vera"]').wait_for()
    found["users"] = serious_violations(page)
    page.goto(f"{base}/audit")
    page.locator("#audit-list li").first.wait_for()
    found["audit"] = serious_violations(page)
    viewer = open_page(ui.TABLET)
    login(viewer, base, "vera")
    viewer.locator(".tile img").first.wait_for()
    found["wall (viewer, tablet)"] = serious_violations(viewer)
    for path, ready in (
        ("/events", ".timeline li[data-id]"),
        ("/events/a11y1", "#facts dt"),
        ("/zones/cam1", "#shape-list button"),
        ("/health", ".health-card h3"),
    ):
        viewer.goto(f"{base}{path}")
        viewer.locator(ready).first.wait_for()
        found[f"{path} (viewer, tablet)"] = serious_violations(viewer)
    viewer.goto(f"{base}/users")
    found["/users: not allowed (viewer)"] = serious_violations(viewer)
    viewer.goto(f"{base}/zones/nope")
    found["/zones/nope: no such camera"] = serious_violations(viewer)
    bad = {name: v for name, v in found.items() if v}
    assert not bad, json.dumps(bad, indent=1)


def test_the_zones_editor_works_from_the_keyboard(live_server, open_page):
    """Select a shape in the list, move its first corner with the arrow keys, add a point, delete another,
    save: all with key presses (no pointer), and the saved zone is what the keys made."""
    runtime = live_server.console.runtime
    page = open_page()
    login(page, live_server.url, "ada", next_path="/zones/cam1")
    button = page.locator("#shape-list button", has_text="parking")
    button.wait_for()
    page.locator("#overlay g").first.wait_for(state="attached")
    button.focus()
    page.keyboard.press("Enter")  # select the shape
    assert page.evaluate("() => document.activeElement.textContent").startswith("parking")  # focus kept
    assert page.locator("#overlay").get_attribute("tabindex") == "0"  # in the tab order
    page.locator("#overlay").focus()
    page.keyboard.press("]")  # its first point: (0, 140)
    assert "Point 1 of 4 of zone parking: x 0, y 140" in page.locator("#zones-status").inner_text()
    for key in ["Shift+ArrowRight", "Shift+ArrowRight", "ArrowRight", "ArrowUp", "ArrowUp"]:
        page.keyboard.press(key)  # 21 right, 2 up
    assert "x 21, y 138" in page.locator("#zones-status").inner_text()
    page.keyboard.press("]")  # the second point, (100, 140)
    page.keyboard.press("+")  # a point halfway to the third, (100, 160)
    assert "Point 3 of 5 of zone parking: x 100, y 160" in page.locator("#zones-status").inner_text()
    page.keyboard.press("Shift+ArrowRight")
    page.keyboard.press("]")
    page.keyboard.press("]")  # the fifth point, (0, 180)
    page.keyboard.press("Delete")
    assert page.locator("#overlay g.selected circle.handle").count() == 4
    page.locator("#save").focus()
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('zones-status').textContent.startsWith('Saved at')")
    parking = next(z for z in runtime.get_zones("cam1")["zones"] if z["name"] == "parking")
    assert [[round(x), round(y)] for x, y in parking["polygon"]] == [[21, 138], [100, 140], [110, 160], [100, 180]]


def test_a_viewer_is_told_when_media_is_withheld(live_server, open_page, make_event):
    """A camera that blurs, an incident whose snapshot has no blurred copy (written before the blur was on):
    the viewer's incident page says the media is withheld (not "being written" for ever), the admin's shows it."""
    import cv2
    import numpy as np

    console = live_server.console
    runtime = console.runtime
    runtime.put_zones("cam1", {**runtime.get_zones("cam1"), "privacy": {"blur": "persons", "masks": []}})
    runtime.snapshots_dir.mkdir(parents=True, exist_ok=True)
    sharp = runtime.snapshots_dir / "withheld0.jpg"
    cv2.imwrite(str(sharp), np.full((180, 320, 3), 90, np.uint8))
    runtime.store.add(make_event(event_id="withheld0", camera_id="cam1", snapshot_path=str(sharp)))
    base = live_server.url
    viewer = open_page()
    login(viewer, base, "vera", next_path="/events/withheld0")
    viewer.locator("#facts dt").first.wait_for()
    note = viewer.locator("#clip-note")
    wait_until(lambda: note.inner_text().startswith("Withheld"), 5)
    assert note.inner_text().startswith("Withheld") and not viewer.locator("#snapshot").is_visible()
    assert serious_violations(viewer) == []
    admin = open_page()
    login(admin, base, "ada", next_path="/events/withheld0")
    admin.locator("#snapshot").wait_for()
    assert "Withheld" not in admin.locator("#clip-note").inner_text()
