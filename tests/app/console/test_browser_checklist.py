"""Checklists and evidence export in a real headless Chromium against a real uvicorn (`served_console`).

An operator ticks two of the four steps of an incident's checklist (each tick saved and shown with who
ticked it), resolving without a note is refused with the API's message, the timeline shows "2 of 4 steps",
and "Export evidence" with a reason downloads a bundle that verifies. On the timeline every incident can be
selected, a resolved one too: exported from the selection with a reason, the bundle passes
`campusguard evidence verify`, the export is audited with who and why, and the incidents are kept.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import test_browser_console as ui  # its fixtures (Chromium, pages, screenshots) and helpers
from fakes_console import LiveServer, console_yaml, served_console

from campusguard.app.evidence.bundle import public_pem, verify_bundle
from campusguard.app.evidence.keys import key_path, load_or_create_key

browser, open_page, shots = ui.browser, ui.open_page, ui.shots  # fixtures, used by name
login = ui.login

pytestmark = pytest.mark.slow
SOP = ["Send the patrol", "Check the door", "Call the duty officer", "Write the log"]


@pytest.fixture
def sop_server(console_video: Path, tmp_path: Path) -> Iterator[LiveServer]:
    config = tmp_path / "watch.yaml"
    config.write_text(
        console_yaml(console_video, tmp_path).replace(
            "        min_seconds: 1.0\n", f"        min_seconds: 1.0\n        sop: {json.dumps(SOP)}\n", 1
        )
    )
    yield from served_console(config, tmp_path)


def test_operator_ticks_steps_resolve_needs_a_note_and_exports_evidence(sop_server, open_page, shots, make_event):
    console = sop_server.console
    rule = next(r.display_name() for r in console.runtime.loaded.config.cameras[0].rules if r.kind == "intrusion")
    console.runtime.store.add(make_event(event_id="chk0", camera_id="cam1", rule_name=rule, zone="east", start_s=1.0))
    page = open_page()
    login(page, sop_server.url, "otto", next_path="/events/chk0")
    steps = page.locator("#checklist-steps li")
    steps.nth(3).wait_for()
    assert steps.count() == 4 and page.locator("#checklist-count").inner_text() == "0 of 4 steps"
    for i in (0, 1):
        steps.nth(i).locator("input[type=checkbox]").check()
        page.locator(f"#checklist-count:text('{i + 1} of 4 steps')").wait_for()
    assert "ticked by otto" in steps.nth(0).inner_text()
    page.click("#resolve")
    page.locator("#review-error").wait_for()
    assert "not ticked" in page.locator("#review-error").inner_text()
    shots.take(page, "event-checklist")
    marks = console.runtime.store.checklists(["chk0"])["chk0"]
    assert {s for s, m in marks.items() if m.checked and m.by == "otto"} == set(SOP[:2])

    page.fill("#evidence-reason", "insurer claim 4411")
    with page.expect_download() as info:
        page.click("#export-evidence")
    bundle = Path(info.value.path())
    assert verify_bundle(bundle).ok and verify_bundle(bundle).manifest["reason"] == "insurer claim 4411"
    page.locator("#evidence-status:text('Exported')").wait_for()
    assert console.runtime.store.get_record("chk0").kept

    page.goto(f"{sop_server.url}/events")
    badge = page.locator('.timeline li[data-id="chk0"] .badge.steps')
    badge.wait_for()
    assert badge.inner_text() == "2 of 4 steps"
    shots.take(page, "events-checklist")


def test_a_resolved_incident_is_selected_on_the_timeline_and_exported(sop_server, open_page, shots, make_event, tmp_path):
    console = sop_server.console
    store = console.runtime.store
    rule = next(r.display_name() for r in console.runtime.loaded.config.cameras[0].rules if r.kind == "intrusion")
    for eid, start in (("res0", 1.0), ("open0", 2.0)):
        store.add(make_event(event_id=eid, camera_id="cam1", rule_name=rule, zone="east", start_s=start))
    store.review("res0", "resolve", user="ada", note="patrol found nobody")
    assert store.get_record("res0").state == "resolved" and not store.get_record("res0").kept
    page = open_page()
    login(page, sop_server.url, "otto", next_path="/events")
    resolved = page.locator('.timeline li[data-id="res0"] input.pick')
    resolved.wait_for()
    assert resolved.is_enabled()
    resolved.check()
    page.locator('.timeline li[data-id="open0"] input.pick').check()
    assert page.locator("#bulk-count").inner_text() == "2 selected (1 resolved: export only)"
    assert page.is_enabled("#bulk-ack")  # the open one can still be acknowledged

    page.fill("#bulk-reason", "insurer claim 5120")
    with page.expect_download() as info:
        page.click("#bulk-evidence")
    bundle = Path(info.value.path())
    page.locator("#bulk-result:text('Exported 2 incident(s)')").wait_for()
    page.locator('.timeline li[data-id="res0"] .badge.kept').wait_for()
    shots.take(page, "events-export-resolved")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    # the recipient pins the site's published key (unpinned, an intact bundle exits 3: issue 44)
    site_key = load_or_create_key(key_path(console.runtime.loaded.config))
    pem = tmp_path / "site.pub.pem"
    pem.write_bytes(public_pem(site_key.public_key()))
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from campusguard.cli.main import main; sys.exit(main(sys.argv[1:]))"]
        + ["evidence", "verify", str(bundle), "--key", str(pem)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 incident(s)" in done.stdout
    manifest = verify_bundle(bundle).manifest
    assert sorted(manifest["incidents"]) == ["open0", "res0"] and manifest["reason"] == "insurer claim 5120"
    entries, _ = console.users.audit_entries(action="evidence.export", limit=10)
    assert {(e.target, e.user, e.details["reason"]) for e in entries} == {
        ("res0", "otto", "insurer claim 5120"),
        ("open0", "otto", "insurer claim 5120"),
    }
    record = store.get_record("res0")
    assert record.kept and record.state == "resolved"

    # acknowledging the selection applies to the open one only; the resolved one stays selected
    page.click("#bulk-ack")
    page.locator("#bulk-result:text('1 acknowledged.')").wait_for()
    assert store.get_record("open0").state == "acknowledged" and resolved.is_checked()
