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
