"""`OutboxSender`: the one sender thread of the durable sinks survives any error in a round, and stops
when told; `Retry` holds a failed message for its back-off or gives it up by age or by attempts."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from campusguard.app.alerts.outbox import Outbox
from campusguard.app.alerts.sender import OutboxSender, Retry


def test_the_sender_survives_errors_in_a_round_and_stops_when_told(tmp_path: Path, caplog: Any) -> None:
    faults: list[BaseException] = [sqlite3.OperationalError("disk I/O error"), RuntimeError("a bug of ours")]
    rounds = 0
    went_on = threading.Event()

    def step() -> None:
        nonlocal rounds
        rounds += 1
        if faults:
            raise faults.pop(0)
        went_on.set()
        sender.wait(0.05)

    sender = OutboxSender("test-sender", step, what="test sink", outbox=tmp_path / "o.db")
    with caplog.at_level(logging.WARNING, logger="campusguard.app.alerts.sender"):
        sender.start()
        assert went_on.wait(10), "the sender did not go on after the errors"
        sender.stop(5)
    assert not sender.thread.is_alive() and rounds >= 3
    text = caplog.text
    assert "test sink outbox" in text and "disk I/O error" in text  # the outbox fault, said once
    assert "test sink: the sender hit an unexpected error; it goes on" in text


def test_retry_holds_a_failed_message_then_gives_it_up(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "o.db")
    try:
        outbox.add([("incident-1", b"{}", False)])
        (message,) = outbox.due(10)
        now = time.time()
        retry = Retry(backoff_s=2.0, backoff_max_s=60.0, max_age_s=3600.0, retries=1)
        assert not retry.gives_up(message, now)
        retry.hold(outbox, message, "HTTP 503", now)
        assert outbox.due(10) == [] and abs((outbox.next_due() or 0) - (now + 2.0)) < 0.5  # held for its back-off
        outbox.all_due()
        (again,) = outbox.due(10)
        assert again.attempts == 1 and retry.gives_up(again, now)  # a second failure is past `retries`
        assert Retry(2.0, 60.0, 3600.0).gives_up(again, again.created + 3600.0)  # too old
        assert not Retry(2.0, 60.0, 3600.0).gives_up(again, now)
    finally:
        outbox.close()
