"""Review at scale over the real app and store: bulk acknowledge / resolve, open incidents per camera,
the paged and filtered audit log, and the HTML 403 page of admin pages (API routes keep JSON 403).

The incidents are written into the console's real event store (SQLite) with the store's own `add`;
the bulk route, the audit log and the live event bus are the product's.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from campusguard.app.events import Event


@pytest.fixture
def seeded(console, make_event: Callable[..., Event]):
    for i in range(5):
        console.runtime.store.add(make_event(event_id=f"inc{i}", camera_id="cam1", start_s=float(i)))
    console.runtime.store.add(make_event(event_id="other", camera_id="cam9", start_s=9.0))
    return console


def bulk(c, user, **body):
    return c.client().post("/api/v1/events/bulk", json=body, headers=c.bearer(user))


def test_bulk_acknowledge_with_one_note_is_stored_audited_and_pushed_live(seeded):
    c = seeded
    before = c.audit_count()
    with c.runtime.subscribe_events() as live:
        r = bulk(c, "otto", ids=["inc0", "inc1", "inc2"], action="acknowledge", note="patrol checked all three")
        assert r.status_code == 200, r.text
        pushed = [live.get(1.0) for _ in range(3)]
    out = r.json()
    assert [e["id"] for e in out["updated"]] == ["inc0", "inc1", "inc2"]
    assert {(e["state"], e["acknowledged_by"], e["note"]) for e in out["updated"]} == {
        ("acknowledged", "otto", "patrol checked all three")
    }
    assert out["missing"] == [] and out["conflicts"] == {}
    assert [p["id"] for p in pushed if p] == ["inc0", "inc1", "inc2"]
    assert all(p["state"] == "acknowledged" for p in pushed if p)
    for eid in ("inc0", "inc1", "inc2"):
        record = c.runtime.store.get_record(eid)
        assert record is not None and record.state == "acknowledged" and record.note == "patrol checked all three"
    # one audit entry per incident, like a single acknowledge, saying it was part of a bulk of 3
    entries, total = c.users.audit_entries(limit=10)
    assert total == before + 3
    assert sorted((e.user, e.action, e.target, e.details["note"], e.details["bulk"]) for e in entries[:3]) == [
        ("otto", "event.acknowledge", f"inc{i}", "patrol checked all three", 3) for i in range(3)
    ]


def test_bulk_reports_unknown_ids_and_wrong_states_per_id(seeded):
    c = seeded
    assert bulk(c, "ada", ids=["inc3"], action="resolve", note="false alarm").status_code == 200
    r = bulk(c, "ada", ids=["inc3", "inc4", "ghost", "inc4"], action="acknowledge")
    assert r.status_code == 200
    out = r.json()
    assert [e["id"] for e in out["updated"]] == ["inc4"]
    assert out["conflicts"] == {"inc3": "resolved"} and out["missing"] == ["ghost"]
    assert c.runtime.store.get_record("inc3").note == "false alarm"  # left alone


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"ids": [], "action": "acknowledge"}, "ids"),
        ({"ids": [f"e{i}" for i in range(501)], "action": "acknowledge"}, "ids"),
        ({"ids": ["inc0"], "action": "delete"}, "action"),
        ({"ids": ["../etc/passwd"], "action": "resolve"}, "ids"),
        ({"ids": ["inc0"], "action": "resolve", "note": "x" * 2001}, "note"),
        ({"ids": ["inc0"], "action": "resolve", "extra": 1}, "extra"),
        ({"ids": "inc0", "action": "resolve"}, "ids"),
    ],
)
def test_bulk_refuses_bad_bodies_with_a_422_naming_the_field(seeded, body, problem):
    r = seeded.client().post("/api/v1/events/bulk", json=body, headers=seeded.bearer("otto"))
    assert r.status_code == 422 and problem in r.text and "Traceback" not in r.text
    assert seeded.runtime.store.get_record("inc0").state == "open"


def test_bulk_is_for_operators_and_admins(seeded):
    c = seeded
    assert bulk(c, "vera", ids=["inc0"], action="acknowledge").status_code == 403
    assert c.client().post("/api/v1/events/bulk", json={"ids": ["inc0"], "action": "resolve"}).status_code == 401
    assert c.runtime.store.get_record("inc0").state == "open"
    assert bulk(c, "ada", ids=[f"inc{i}" for i in range(5)] * 100, action="resolve").status_code == 200  # 500 ids
    assert c.runtime.store.query_records()[1] == 6 and c.runtime.store.get_record("inc4").state == "resolved"


def test_open_incidents_per_camera(seeded):
    c = seeded
    h = c.bearer("vera")
    assert c.client().get("/api/v1/open-incidents", headers=h).json() == {"cameras": {"cam1": 5, "cam9": 1}, "total": 6}
    bulk(c, "otto", ids=["inc0", "inc1", "other"], action="acknowledge")
    assert c.client().get("/api/v1/open-incidents", headers=h).json() == {"cameras": {"cam1": 3}, "total": 3}


def test_audit_log_is_paged_and_filtered(console):
    users = console.users
    for i in range(30):
        users.audit("otto" if i % 3 else "ada", "event.acknowledge" if i % 2 else "zones.update", f"t{i}", n=i)
    users.audit("otto", "event.resolve", "t30")
    client, h = console.client(), console.bearer("ada")

    def page(**params):
        r = client.get("/api/v1/audit", params=params, headers=h)
        assert r.status_code == 200, r.text
        return r.json()

    everything = page(limit=1000)
    first, second = page(limit=10), page(limit=10, offset=10)
    assert first["total"] == second["total"] == everything["total"] >= 31
    assert [e["id"] for e in first["items"] + second["items"]] == [e["id"] for e in everything["items"][:20]]
    otto = page(user="otto", limit=1000)
    assert otto["total"] == 21 and {e["user"] for e in otto["items"]} == {"otto"}
    acks = page(action="event.acknowledge", limit=1000)
    assert acks["total"] == 15 and {e["action"] for e in acks["items"]} == {"event.acknowledge"}
    events = page(action="event.", limit=1000)  # every event action
    assert events["total"] == 16 and {e["action"] for e in events["items"]} == {"event.acknowledge", "event.resolve"}
    assert page(user="otto", action="zones.update")["total"] == 10
    now = datetime.now(UTC)
    assert page(since=(now + timedelta(minutes=1)).isoformat())["total"] == 0
    assert page(until=(now - timedelta(days=1)).isoformat())["total"] == 0
    assert page(since=(now - timedelta(minutes=5)).isoformat())["total"] == everything["total"]
    assert page(until=(now + timedelta(minutes=1)).replace(tzinfo=None).isoformat())["total"] == everything["total"]
    facets = client.get("/api/v1/audit/facets", headers=h).json()
    assert {"ada", "otto"} <= set(facets["users"]) and "event.resolve" in facets["actions"]
    assert client.get("/api/v1/audit", params={"since": "yesterday"}, headers=h).status_code == 422
    assert client.get("/api/v1/audit", params={"limit": 1001}, headers=h).status_code == 422
    for who in ("vera", "otto"):
        assert client.get("/api/v1/audit", headers=console.bearer(who)).status_code == 403
        assert client.get("/api/v1/audit/facets", headers=console.bearer(who)).status_code == 403


@pytest.mark.parametrize("path", ["/users", "/audit"])
def test_admin_pages_give_lower_roles_an_html_403_page(console, path):
    client = console.client()
    for who, role in (("vera", "viewer"), ("otto", "operator")):
        r = client.get(path, headers=console.bearer(who))
        assert r.status_code == 403 and r.headers["content-type"].startswith("text/html")
        assert "Not allowed" in r.text and f"You are logged in as {role}" in r.text and "needs the admin role" in r.text
        assert r.headers["cache-control"] == "no-store" and "script-src 'self'" in r.headers["content-security-policy"]
    assert client.get(path, headers=console.bearer("ada")).status_code == 200
    # the API keeps its JSON 403
    api = client.get("/api/v1/users", headers=console.bearer("vera"))
    assert api.status_code == 403 and api.headers["content-type"] == "application/json"
    assert "needs role admin" in api.json()["detail"]
