"""`SiteLeader` on the real PostgreSQL: one leader per job and site, a site being a schema."""

from __future__ import annotations

import time

import pytest
from polling import wait_until  # noqa: E402 - tests/app is on the path (conftest)

from campusguard.app.nodes.leader import RETENTION_JOB, SiteLeader, site_lock_key

pytest.importorskip("psycopg")


@pytest.fixture
def two_sites(postgres_url: str, other_postgres_url: str) -> tuple[str, str]:
    """The URLs of two sites in two fresh schemas of the one test database."""
    return postgres_url, other_postgres_url


def _leader(url: str, job: str = RETENTION_JOB, names: tuple[str, ...] = ()) -> SiteLeader:
    return SiteLeader(url, job, lambda: None, lambda: None, names=names, retry_s=0.1)


def test_two_sites_in_two_schemas_of_one_database_each_have_a_retention_leader(two_sites: tuple[str, str]) -> None:
    leaders = [_leader(url) for url in two_sites]
    for leader in leaders:
        leader.start()
    try:
        assert wait_until(lambda: all(leader.leading for leader in leaders), 10)
        assert leaders[0].key != leaders[1].key
    finally:
        for leader in leaders:
            leader.stop()


def test_two_nodes_of_one_site_have_one_retention_leader_and_the_other_takes_over(two_sites: tuple[str, str]) -> None:
    first, second = _leader(two_sites[0]), _leader(two_sites[0])
    first.start()
    assert wait_until(lambda: first.leading, 10)
    second.start()
    try:
        time.sleep(0.5)  # several of the follower's tries
        assert not second.leading
        first.stop()
        assert wait_until(lambda: second.leading, 10)
    finally:
        first.stop()
        second.stop()


def test_the_lock_key_differs_by_schema_job_and_name() -> None:
    keys = {
        site_lock_key("a", RETENTION_JOB),
        site_lock_key("b", RETENTION_JOB),
        site_lock_key("a", "mqtt state", "bus"),
        site_lock_key("a", "mqtt state", "other"),
        site_lock_key("b", "mqtt state", "bus"),
    }
    assert len(keys) == 5
    assert all(0 <= key < 1 << 63 for key in keys)
