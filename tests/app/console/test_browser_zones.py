"""The zone editor in a real headless Chromium against a real uvicorn and a started `ConsoleRuntime`
(the fixtures of `test_browser_console`): a vertex shared by a zone and a line moves only the selected
shape; clicks over a zone add points while drawing; renaming a zone takes its rules along; a rejected
save shows the field and no server path; the save status stays on screen at 1366x768 and 820x1180;
a privacy mask is drawn, saved and audited. Screenshots of the editor at both sizes."""

from __future__ import annotations

import time
from typing import Any

import pytest
import test_browser_console as pages
import yaml
from test_browser_console import LAPTOP, _click_frame, _frame_to_page, login

pytestmark = pytest.mark.slow
browser, open_page, shots = pages.browser, pages.open_page, pages.shots  # that module's fixtures, shared
TABLET_PORTRAIT = {"width": 820, "height": 1180}
SHARED = [100.0, 60.0]  # a corner of zone 'yard' and an end of line 'gate'
EAST = {"name": "east", "polygon": [[160, 0], [320, 0], [320, 180], [160, 180]]}
PARKING = {"name": "parking", "polygon": [[0, 140], [100, 140], [100, 180], [0, 180]]}


def saved_camera(live_server: Any) -> dict[str, Any]:
    return yaml.safe_load(live_server.console.config.read_text())["cameras"][0]


def open_editor(live_server: Any, open_page: Any, viewport: dict[str, int] = LAPTOP) -> Any:
    page = open_page(viewport)
    login(page, live_server.url, "ada", next_path="/zones/cam1")
    page.locator("#shape-list button", has_text="east").wait_for()
    page.wait_for_function("() => document.getElementById('zone-image').naturalWidth > 0")
    return page


def save(page: Any) -> None:
    page.click("#save")
    page.wait_for_function(
        "() => { const s = document.getElementById('zones-status').textContent;"
        " return s.startsWith('Saved at') || s.startsWith('Not saved') }"
    )


def drag(page: Any, start: tuple[float, float], end: tuple[float, float]) -> None:
    page.mouse.move(*_frame_to_page(page, start))
    page.mouse.down()
    page.mouse.move(*_frame_to_page(page, ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2)), steps=3)
    page.mouse.move(*_frame_to_page(page, end), steps=3)
    page.mouse.up()


def test_a_shared_vertex_moves_only_the_selected_shape(live_server, open_page, shots):
    runtime = live_server.console.runtime
    yard = {"name": "yard", "polygon": [[40, 20], SHARED, [40, 100]]}
    gate = {"name": "gate", "points": [SHARED, [150, 120]]}
    runtime.put_zones("cam1", {"zones": [EAST, PARKING, yard], "lines": [gate]})
    page = open_editor(live_server, open_page)
    # the line is drawn above the zone; with the zone selected, the shared point is the zone's
    page.locator("#shape-list button", has_text="yard").click()
    drag(page, (100, 60), (120, 80))
    save(page)
    assert page.locator("#zones-status").inner_text().startswith("Saved at"), page.locator("#zones-error").inner_text()
    cam = saved_camera(live_server)
    moved = next(z for z in cam["zones"] if z["name"] == "yard")["polygon"]
    assert [[round(x), round(y)] for x, y in moved] == [[40, 20], [120, 80], [40, 100]]
    assert cam["lines"][0]["points"][0] == SHARED  # the line stayed
    # and the other way round: the line selected, its end moves, the zone's corner stays
    page.locator("#shape-list button", has_text="yard").click()
    drag(page, (120, 80), (100, 60))
    page.locator("#shape-list button", has_text="gate").click()
    drag(page, (100, 60), (90, 40))
    save(page)
    cam = saved_camera(live_server)
    assert [[round(x), round(y)] for x, y in cam["lines"][0]["points"][0:1]] == [[90, 40]]
    assert [[round(x), round(y)] for x, y in cam["zones"][2]["polygon"]][1] == [100, 60]


def test_clicks_over_a_zone_add_points_while_drawing(live_server, open_page, shots):
    page = open_editor(live_server, open_page)
    page.click("#add-zone")
    page.fill("#shape-name", "inner")
    for xy in ((200, 40), (280, 40), (280, 120), (200, 120)):  # all inside zone 'east'
        _click_frame(page, xy)
    assert page.locator("#overlay g.selected circle.handle").count() == 4
    assert page.locator("#shape-list button.selected").inner_text().startswith("inner")
    page.keyboard.press("Enter")  # drawing ends: a click on 'east' now selects it
    assert page.locator("#done-drawing").is_hidden()
    _click_frame(page, (300, 160))
    assert page.locator("#shape-list button.selected").inner_text().startswith("east")
    save(page)
    inner = next(z for z in saved_camera(live_server)["zones"] if z["name"] == "inner")
    assert [[round(x), round(y)] for x, y in inner["polygon"]] == [[200, 40], [280, 40], [280, 120], [200, 120]]


def test_renaming_a_zone_renames_its_rules_and_errors_name_no_path(live_server, open_page, shots):
    page = open_editor(live_server, open_page)
    page.locator("#shape-list button", has_text="east").click()
    page.fill("#shape-name", "east-wing")
    assert page.locator("#rules-title").inner_text() == "Rules on zone east-wing"
    save(page)
    assert page.locator("#zones-status").inner_text().startswith("Saved at"), page.locator("#zones-error").inner_text()
    cam = saved_camera(live_server)
    assert [z["name"] for z in cam["zones"]] == ["east-wing", "parking"]
    assert [r["zone"] for r in cam["rules"]] == ["east-wing", "parking"]
    # a class the model does not know: the server's message names the rule's field, not the file
    rule = page.locator("#rule-list details.rule").first
    rule.locator("> summary").click()
    rule.locator("input[name=classes]").fill("person, unicorn")
    rule.locator("input[name=classes]").press("Tab")
    before = live_server.console.config.read_text()
    save(page)
    error = page.locator("#zones-error")
    assert error.is_visible() and "rules[0].classes[1]: unknown class 'unicorn'" in error.inner_text()
    for path in (live_server.console.config, live_server.console.tmp):
        assert str(path) not in error.inner_text()
    assert live_server.console.config.read_text() == before


@pytest.mark.parametrize("viewport", [LAPTOP, TABLET_PORTRAIT], ids=["1366x768", "820x1180"])
def test_save_status_stays_on_screen(live_server, open_page, shots, viewport):
    page = open_editor(live_server, open_page, viewport)
    page.locator("#shape-list button", has_text="parking").click()
    page.select_option("#rule-kind", "loitering")
    page.click("#add-rule-button")
    save(page)

    def on_screen(selector: str) -> bool:
        box = page.locator(selector).bounding_box()
        return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= viewport["height"]

    assert page.locator("#zones-status").inner_text().startswith("Saved at")
    assert on_screen("#zones-status") and on_screen("#save")
    name = "zones-editor" if viewport is LAPTOP else "zones-editor-tablet"
    shots.take(page, name)
    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")  # the rule forms are below the picture
    time.sleep(0.2)
    assert on_screen("#zones-status") and on_screen("#save")  # the toolbar sticks under the navigation
    shots.take(page, f"{name}-scrolled")
    loiter = [r for r in saved_camera(live_server)["rules"] if r["kind"] == "loitering"]
    assert [r["zone"] for r in loiter] == ["parking"]


def test_a_privacy_mask_is_drawn_saved_and_audited(live_server, open_page, shots):
    page = open_editor(live_server, open_page)
    page.click("#add-mask")
    page.fill("#shape-name", "dorm-windows")
    for xy in ((10, 5), (150, 5), (150, 30), (10, 30)):
        _click_frame(page, xy)
    page.click("#done-drawing")
    page.select_option("#privacy-blur", "persons")
    assert page.locator("#rules-note").inner_text().startswith("A privacy mask has no rules")
    shots.take(page, "zones-mask")
    save(page)
    assert page.locator("#zones-status").inner_text().startswith("Saved at"), page.locator("#zones-error").inner_text()
    privacy = saved_camera(live_server)["privacy"]
    assert privacy["blur"] == "persons"
    assert [m["name"] for m in privacy["masks"]] == ["dorm-windows"]
    assert [[round(x), round(y)] for x, y in privacy["masks"][0]["polygon"]] == [[10, 5], [150, 5], [150, 30], [10, 30]]
    entries, _ = live_server.console.users.audit_entries(limit=5)
    assert any(e.user == "ada" and e.action == "privacy.update" and e.target == "cam1" for e in entries)
    assert page.locator("#overlay g.mask").count() == 1
    # a viewer sees the mask but cannot change it
    viewer = open_page()
    login(viewer, live_server.url, "vera", next_path="/zones/cam1")
    viewer.locator("#shape-list button", has_text="dorm-windows").wait_for()
    assert viewer.locator("#privacy-blur").is_disabled() and viewer.locator("#add-mask").is_hidden()


def test_a_stale_save_shows_the_conflict_and_offers_a_reload(live_server, open_page, shots):
    """Another admin saves while this editor is open: its save is refused (409, nothing overwritten),
    the editor says so and offers a reload, which shows the other admin's zone and blur."""
    page = open_editor(live_server, open_page)
    west = {"name": "west", "polygon": [[0, 0], [150, 0], [150, 130], [0, 130]]}
    other = live_server.console.runtime.put_zones(
        "cam1", {"zones": [EAST, PARKING, west], "privacy": {"blur": "persons"}}
    )  # the other admin's save, made after this page loaded
    page.select_option("#privacy-blur", "faces")
    save(page)
    assert page.locator("#zones-status").inner_text() == "Not saved."
    assert "another admin saved" in page.locator("#zones-error").inner_text()
    assert page.locator("#reload-zones").is_visible()
    shots.take(page, "zones-conflict")
    camera = saved_camera(live_server)
    assert [z["name"] for z in camera["zones"]] == ["east", "parking", "west"] and camera["privacy"][
        "blur"
    ] == "persons"
    page.click("#reload-zones")
    page.locator("#shape-list button", has_text="west").wait_for()
    assert page.locator("#privacy-blur").input_value() == "persons" and page.locator("#reload-zones").is_hidden()
    page.select_option("#privacy-blur", "faces")  # made again on the fresh copy, it saves
    save(page)
    assert page.locator("#zones-status").inner_text().startswith("Saved at"), page.locator("#zones-error").inner_text()
    assert saved_camera(live_server)["privacy"]["blur"] == "faces" and other["zones"][2]["name"] == "west"


def test_escalation_and_checklist_are_set_through_the_rule_form(live_server, open_page, shots):
    """`escalate` (after how long, to which configured sinks) and the `sop` steps, set in the form and
    saved in the config; a form without a sink is refused with the field named and nothing saved."""
    page = open_editor(live_server, open_page)
    page.locator("#shape-list button", has_text="east").click()
    rule = page.locator("#rule-list details.rule").first
    rule.locator("> summary").click()
    on = rule.locator("input.section-on")
    on.check()
    after = rule.locator("input[data-sub=after_s]")
    after.fill("120")
    after.press("Tab")
    assert sorted(rule.locator("input[data-sub=to]").evaluate_all("(xs) => xs.map((x) => x.value)")) == [
        "jsonl",
        "stdout",
    ]
    before = live_server.console.config.read_text()
    save(page)  # no sink chosen yet
    error = page.locator("#zones-error")
    assert error.is_visible() and "escalate.to: List should have at least 1 item" in error.inner_text()
    assert live_server.console.config.read_text() == before

    rule.locator("input[data-sub=to][value=jsonl]").check()
    for text in ("Send the patrol", "Call the duty officer, then write the log", "Lock the gate"):
        rule.locator("button.add-step").click()
        step = rule.locator("input.step").last
        step.fill(text)
        step.press("Tab")
    rule.locator("button.remove-step").nth(2).click()  # "Lock the gate" after all
    assert rule.locator(".step-list label").all_inner_texts() == ["Step 1", "Step 2"]
    shots.take(page, "zones-rule-escalate-sop", full_page=True)
    save(page)
    assert page.locator("#zones-status").inner_text().startswith("Saved at"), error.inner_text()
    saved = saved_camera(live_server)["rules"][0]
    assert saved["escalate"] == {"after_s": 120.0, "to": ["jsonl"]}
    assert saved["sop"] == ["Send the patrol", "Call the duty officer, then write the log"]
    live = live_server.console.runtime.loaded.config.cameras[0].rules[0]
    assert live.escalate is not None and live.escalate.to == ["jsonl"] and live.sop == saved["sop"]

    # read back into the form after a reload; switching escalation off saves no section
    page.reload()
    page.locator("#shape-list button", has_text="east").click()
    rule = page.locator("#rule-list details.rule").first
    rule.locator("> summary").click()
    assert rule.locator("input.step").evaluate_all("(xs) => xs.map((x) => x.value)") == saved["sop"]
    assert rule.locator("input[data-sub=after_s]").input_value() == "120"
    assert rule.locator("input[data-sub=to][value=jsonl]").is_checked()
    rule.locator("input.section-on").uncheck()
    save(page)
    assert page.locator("#zones-status").inner_text().startswith("Saved at"), error.inner_text()
    assert "escalate" not in saved_camera(live_server)["rules"][0]
