"""`NodeDirectory` on the real PostgreSQL: a lease is held by one node at a time, expires, moves once."""

from __future__ import annotations

import time

import pytest

from campusguard.app.nodes.directory import DirectoryUnavailableError, NodeDirectory


@pytest.fixture
def pair(postgres_url):
    a, b = NodeDirectory(postgres_url, "a"), NodeDirectory(postgres_url, "b")
    a.create_tables()
    b.create_tables()  # a second opener finds them
    yield a, b
    a.close()
    b.close()


def test_a_lease_is_held_by_one_node_until_it_expires(pair):
    a, b = pair
    assert a.acquire("cam1", 1.0) == (True, None)
    assert b.acquire("cam1", 1.0) == (False, None)  # valid and a's
    assert a.acquire("cam1", 1.0) == (True, None)  # a renews by taking it again
    assert a.renew({"cam1": {"state": "live"}}, 1.0) == {"cam1"}
    time.sleep(1.3)
    assert b.acquire("cam1", 5.0) == (True, "a")  # expired: b takes it, and learns from whom
    assert a.renew({"cam1": {"state": "live"}}, 5.0) == set()  # a lost it: it must stop the camera
    lease = a.leases()["cam1"]
    assert (lease.node, lease.valid, lease.moves) == ("b", True, 1)


def test_a_released_lease_is_free_at_once_and_a_goodbye_frees_all(pair):
    a, b = pair
    assert a.acquire("cam1", 30.0)[0] and a.acquire("cam2", 30.0)[0]
    a.release("cam1")
    assert b.acquire("cam1", 30.0) == (True, "a")
    a.heartbeat("http://a", "host", 1, first=True, gap_s=4)
    a.say_goodbye()
    assert b.acquire("cam2", 30.0) == (True, "a")
    (node,) = [n for n in b.nodes() if n.name == "a"]
    assert node.stopped and node.url == "http://a"


def test_heartbeats_track_who_is_live_and_since_when(pair):
    a, b = pair
    a.heartbeat("http://a", "h", 1, first=True, gap_s=1.0)
    b.heartbeat("http://b", "h", 2, first=True, gap_s=1.0)
    time.sleep(1.2)
    a.heartbeat("http://a", "h", 1, first=False, gap_s=1.0)  # seen again after a gap: joins anew
    by_name = {n.name: n for n in a.nodes()}
    assert by_name["a"].joined_s < 0.5 and by_name["a"].age_s < 0.5
    assert by_name["b"].age_s >= 1.2 and not by_name["b"].stopped


def test_an_unreachable_server_is_one_typed_error():
    d = NodeDirectory("postgresql://nobody@127.0.0.1:1/none", "a")
    with pytest.raises(DirectoryUnavailableError, match="heartbeat on postgresql://nobody@127.0.0.1:1/none"):
        d.heartbeat(None, "h", 1, first=True, gap_s=4)
