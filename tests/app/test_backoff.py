"""`Backoff`: the one exponential back-off of the app's retry loops."""

from __future__ import annotations

import itertools
import threading

import pytest

from campusguard.app.infra.backoff import Backoff


@pytest.mark.parametrize(
    ("backoff", "expected"),
    [
        (Backoff(0.5, 3.0, 2.0), [0.5, 1.0, 2.0, 3.0, 3.0]),
        (Backoff(0.1, 2.0), [0.1, 0.2, 0.4, 0.8, 1.6, 2.0]),
        (Backoff(1.0, 1.0, 1.0), [1.0, 1.0, 1.0]),
        (Backoff(5.0, 2.0), [2.0, 2.0]),  # the cap holds from the first delay
        (Backoff(0.0, 30.0), [0.0, 0.0]),
    ],
)
def test_delays_grow_and_cap(backoff, expected):
    assert list(itertools.islice(backoff.delays(), len(expected))) == pytest.approx(expected)


def test_jitter_only_shortens():
    delays = list(itertools.islice(Backoff(1.0, 8.0, 2.0, jitter=0.5).delays(), 200))
    nominal = [min(2.0**i, 8.0) for i in range(200)]
    assert all(n * 0.5 <= d <= n for d, n in zip(delays, nominal, strict=True))
    assert delays != nominal


@pytest.mark.parametrize("kwargs", [{"initial_s": -1}, {"max_s": -1}, {"factor": 0.5}, {"jitter": 1.5}])
def test_bad_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        Backoff(**{"initial_s": 1.0, "max_s": 2.0, **kwargs})


def test_waits_stop_at_once_when_asked():
    stop = threading.Event()
    waits = Backoff(0.001, 0.001).waits(stop)
    assert next(waits) is False  # waited the delay out
    stop.set()
    assert next(waits) is True


def test_the_retry_loops_share_it():
    """The readers, the PostgreSQL store and the durable sinks' one sender (`alerts/sender.py`, the webhook's
    retries among them) count their delays with `Backoff`; no sink counts its own."""
    from pathlib import Path

    import campusguard.app as app

    root = Path(app.__file__).parent
    for name in ("engine/sources.py", "events/pgsession.py", "alerts/sender.py"):
        text = (root / name).read_text()
        assert "from campusguard.app.infra.backoff import Backoff" in text, name
        assert "2 **" not in text and "* self.factor" not in text, name
    for name in ("alerts/webhook.py", "alerts/email.py", "alerts/mqtt.py"):
        text = (root / name).read_text()
        assert "2 **" not in text and "* self.factor" not in text, name


def test_the_delay_by_attempt_count_is_the_same_sequence():
    """The durable outboxes keep only an attempt count: `Backoff.delay` gives the delays `delays` yields."""
    from itertools import islice

    from campusguard.app.infra.backoff import Backoff

    b = Backoff(0.5, 30.0)
    assert [b.delay(n) for n in range(1, 9)] == list(islice(b.delays(), 8)) == [0.5, 1, 2, 4, 8, 16, 30, 30]
