"""LogThrottle: one line per key and interval, a count of the held-back ones, nothing when disabled."""

from __future__ import annotations

import logging

import pytest

from campusguard.app.infra.throttle import LogThrottle


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_one_line_per_key_and_interval_with_held_back_count(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    throttle = LogThrottle(logging.getLogger("campusguard.test.throttle"), interval_s=10.0, clock=clock)
    with caplog.at_level(logging.DEBUG, logger="campusguard.test.throttle"):
        assert throttle.debug("cam1", "gate %s", "skip")
        assert not throttle.debug("cam1", "gate %s", "skip")
        assert not throttle.debug("cam1", "gate %s", "skip")
        assert throttle.debug("cam2", "gate %s", "whole")  # another key is not held back
        clock.t += 10.0
        assert throttle.debug("cam1", "gate %s", "regions")
    assert {r.filename for r in caplog.records} == {"test_throttle.py"}  # the caller's line, not the throttle's
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "gate skip",
        "gate whole",
        "gate regions (2 similar line(s) held back in the last 10 s)",
    ]


def test_disabled_level_logs_and_counts_nothing(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    throttle = LogThrottle(logging.getLogger("campusguard.test.throttle2"), interval_s=10.0, clock=clock)
    with caplog.at_level(logging.INFO, logger="campusguard.test.throttle2"):
        assert not throttle.debug("k", "x")
    with caplog.at_level(logging.DEBUG, logger="campusguard.test.throttle2"):
        assert throttle.debug("k", "y")  # the disabled call did not start the interval
    assert [r.getMessage() for r in caplog.records] == ["y"]


def test_negative_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        LogThrottle(logging.getLogger("x"), interval_s=-1)


def test_an_outage_is_one_line_when_it_starts_and_one_when_it_ends(caplog: pytest.LogCaptureFixture) -> None:
    from campusguard.app.infra.throttle import OutageLog

    clock = _Clock()
    outage = OutageLog(logging.getLogger("campusguard.test.outage"), "PostgreSQL event store db@host", clock=clock)
    with caplog.at_level(logging.WARNING, logger="campusguard.test.outage"):
        assert not outage.up()  # nothing was down: nothing to say
        assert outage.down("connection refused")
        for _ in range(20):  # a retry every 2 s for 40 s
            clock.t += 2.0
            assert not outage.down("connection refused")
        clock.t += 2.0
        assert outage.up("reachable again")
        assert not outage.up()
        assert outage.down("timeout")  # a new outage is a new line
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "PostgreSQL event store db@host: connection refused (outage started; logged again when it ends)",
        "PostgreSQL event store db@host: reachable again after 42.0 s of outage (20 failure(s) held back)",
        "PostgreSQL event store db@host: timeout (outage started; logged again when it ends)",
    ]
    assert {r.filename for r in caplog.records} == {"test_throttle.py"}
    assert outage.outages == 2 and outage.is_down
