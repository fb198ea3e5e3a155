"""Node faults over real processes: a hung node (SIGSTOP) with three nodes, and PostgreSQL restarted.

What must hold in each: the cameras of a node that cannot renew its leases are taken by the
others, a node that comes back finds it has lost them and stops them at once (each camera is read
by one node: the HTTP cameras count their open streams), and everything runs again afterwards."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from pg_server import OwnPostgres

from conftest import Site, add_admin, login, wait_for

pytestmark = pytest.mark.slow






def _one_stream_each(site: Site) -> bool:
    return all(c.streams == 1 for c in site.cameras)


def test_a_hung_node_loses_its_cameras_and_stops_them_when_it_wakes(site: Site) -> None:
    add_admin(site)
    nodes = [site.node(n) for n in ("alpha", "beta", "gamma")]
    for n in nodes:
        n.start()
    wait_for(lambda: all(n.up() for n in nodes), 90, "three consoles", 0.3)
    h = login(nodes[0].base)

    def placement() -> dict[str, str | None]:
        return {k: v["node"] for k, v in nodes[0].cameras(h).items() if v["state"] == "live"}

    wait_for(lambda: len(p := placement()) == 4 and set(p.values()) == {"alpha", "beta", "gamma"}, 60,
             "4 live cameras over three nodes", 0.25)
    assert wait_for(lambda: _one_stream_each(site), 10, "one reader per camera")
    hung = next(n for n in nodes[1:] if n.name in placement().values())
    theirs = sorted(c for c, n in placement().items() if n == hung.name)

    hung.kill(signal.SIGSTOP)
    stopped = time.monotonic()
    wait_for(lambda: all(placement().get(c) not in (None, hung.name) for c in theirs), 25,
             f"the others taking {theirs} from the hung {hung.name}", 0.25)
    print(f"{theirs} taken from the hung node in {time.monotonic() - stopped:.1f} s")

    hung.kill(signal.SIGCONT)  # it wakes: its leases are gone, so it must let go of its streams at once
    woke = time.monotonic()
    wait_for(lambda: _one_stream_each(site), 10, f"one reader per camera after {hung.name} woke\n{hung.tail()}", 0.1)
    print(f"{hung.name} let go of its cameras {time.monotonic() - woke:.1f} s after it woke")
    assert "lost the lease" in hung.tail() or "no lease renewal" in hung.tail()

    # it rejoins and gets a share again; still one reader per camera
    wait_for(lambda: len(p := placement()) == 4 and set(p.values()) == {"alpha", "beta", "gamma"}, 60,
             "the woken node back in the assignment", 0.25)
    wait_for(lambda: _one_stream_each(site), 10, "one reader per camera at the end")


@pytest.fixture
def own_postgres():
    server = OwnPostgres()
    try:
        yield server
    finally:
        server.close()


def test_nodes_stop_their_cameras_while_postgresql_is_down_and_resume_after(tmp_path: Path, own_postgres) -> None:
    (tmp_path / "site").mkdir()
    site = Site(tmp_path / "site", own_postgres.url)
    try:
        add_admin(site)
        a, b = site.node("alpha"), site.node("beta")
        a.start()
        b.start()
        wait_for(lambda: a.up() and b.up(), 90, "two consoles", 0.3)
        h = login(a.base)
        wait_for(lambda: all(v["state"] == "live" for v in a.cameras(h).values()), 60, "4 live cameras", 0.25)
        wait_for(lambda: _one_stream_each(site), 10, "one reader per camera")

        own_postgres.stop()
        down = time.monotonic()
        # fenced: every node stops its cameras before its leases could expire (6 s): nobody reads them
        wait_for(lambda: all(c.streams == 0 for c in site.cameras), 15,
                 f"the cameras stopped while PostgreSQL is down\n{a.tail()}", 0.1)
        print(f"every camera stopped {time.monotonic() - down:.1f} s after PostgreSQL went down")
        assert a.proc is not None and a.proc.poll() is None and b.proc is not None and b.proc.poll() is None

        own_postgres.start()
        back = time.monotonic()
        wait_for(lambda: all(v["state"] == "live" for v in a.cameras(h).values()), 60,
                 f"4 live cameras again\n{a.tail()}\n{b.tail()}", 0.25)
        wait_for(lambda: _one_stream_each(site), 10, "one reader per camera again")
        print(f"all 4 live again {time.monotonic() - back:.1f} s after PostgreSQL came back")
    finally:
        site.close()
