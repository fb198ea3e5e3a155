"""The delivery ledger: a restarted JSONL or webhook sink sends nothing it delivered before (issue 24)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from campusguard.app.alerts import JsonlSink, WebhookSink
from campusguard.app.alerts.jsonl import written_keys
from campusguard.app.alerts.ledger import DeliveryLedger, delivery_key
from campusguard.app.events.types import Event


def _incident(make_event):  # type: ignore[no-untyped-def]
    return [
        make_event(phase="start"),
        make_event(phase="update", sequence=1, count=3),
        make_event(phase="end", sequence=2, end_s=20.0),
    ]


def test_a_restarted_jsonl_sink_writes_each_update_once_with_its_sequence(tmp_path: Path, make_event) -> None:
    for _ in range(2):
        sink = JsonlSink(tmp_path / "a.jsonl", ledger=DeliveryLedger(tmp_path / "d.db", "jsonl:a"))
        for ev in _incident(make_event):
            sink.send(ev)
        sink.close()
    lines = [json.loads(x) for x in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [(x["phase"], x["sequence"]) for x in lines] == [("start", 0), ("update", 1), ("end", 2)]


class _RecordsLost(DeliveryLedger):
    """A ledger whose records are not written: a `PgDeliveryLedger` whose server went down between a
    line and its record (logged, never raised), the process then killed before it could retry."""

    def record_key(self, event_id: str, phase: str, sequence: int) -> None:
        return None


def test_a_line_whose_ledger_record_was_lost_is_not_written_again_by_the_restart(tmp_path: Path, make_event) -> None:
    path, ledger_db = tmp_path / "a.jsonl", tmp_path / "d.db"
    first = JsonlSink(path, ledger=_RecordsLost(ledger_db, "jsonl:a"))
    for ev in _incident(make_event):
        first.send(ev)  # each line on disk, no record of it
    # the first run is killed here (no close): the restart's relay hands the same updates on again,
    # and the dead run's end is followed by an interrupted one (another sequence: still the same end)
    again = [*_incident(make_event), make_event(phase="end", sequence=1_000_000_000, end_s=20.0)]
    restart = JsonlSink(path, ledger=DeliveryLedger(ledger_db, "jsonl:a"))
    for ev in again:
        restart.send(ev)
    restart.close()
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [(x["phase"], x["sequence"]) for x in lines] == [("start", 0), ("update", 1), ("end", 2)]
    assert all(DeliveryLedger(ledger_db, "jsonl:a").delivered(ev) for ev in again)  # recorded now


def test_only_the_tail_of_a_long_jsonl_file_is_read_at_open(tmp_path: Path, make_event) -> None:
    path = tmp_path / "a.jsonl"
    sink = JsonlSink(path)
    for i in range(50):
        sink.send(make_event(event_id=f"e{i}"))
    sink.close()
    one_line = len(path.read_bytes()) // 50
    keys = written_keys(path, tail_bytes=10 * one_line + one_line // 2)  # 10 whole lines and a cut one
    assert {k[0] for k in keys} == {f"e{i}" for i in range(40, 50)}
    assert written_keys(tmp_path / "missing.jsonl") == set()


def test_an_incident_ends_once_whatever_the_sequence_of_its_end(tmp_path: Path, make_event) -> None:
    ledger = DeliveryLedger(tmp_path / "d.db", "s")
    ledger.record(make_event(phase="end", sequence=2, end_s=20.0))
    assert ledger.delivered(make_event(phase="end", sequence=1_000_000_000, end_s=20.0))
    assert not ledger.delivered(make_event(phase="update", sequence=2))
    assert not DeliveryLedger(tmp_path / "d.db", "other").delivered(make_event(phase="end", end_s=1.0))


# (recorded phase, sequence), (asked phase, sequence), whether the asked update counts as delivered
_SAME_DELIVERY = [
    (("end", 2), ("end", 1_000_000_000), True),  # any end of the incident is its end
    (("end", 2), ("end", 2), True),
    (("end", 2), ("update", 2), False),
    (("start", 0), ("end", 0), False),
    (("update", 1), ("update", 1), True),
    (("update", 1), ("update", 2), False),
]


@pytest.mark.parametrize(("recorded", "asked", "same"), _SAME_DELIVERY)
def test_the_delivery_key_counts_any_end_as_the_incidents_end(
    recorded: tuple[str, int], asked: tuple[str, int], same: bool
) -> None:
    assert (delivery_key("e1", *recorded) == delivery_key("e1", *asked)) is same
    assert delivery_key("e1", *recorded) != delivery_key("e2", *recorded)


Answerer = tuple[Callable[[Event], object], Callable[[Event], bool]]
"""How one place records an update, and how it answers whether an update was delivered."""


@pytest.fixture(params=["sqlite ledger", "postgresql ledger", "postgresql outbox", "jsonl file"])
def answerer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Answerer]:
    """Every place that decides whether an update was delivered before, on its real storage."""
    if request.param == "sqlite ledger":
        ledger = DeliveryLedger(tmp_path / "d.db", "s")
        yield ledger.record, ledger.delivered
        ledger.close()
    elif request.param == "jsonl file":
        sink, path = JsonlSink(tmp_path / "a.jsonl"), tmp_path / "a.jsonl"
        yield sink.send, lambda ev: delivery_key(ev.event_id, ev.phase, ev.sequence) in written_keys(path)
        sink.close()
    else:
        pytest.importorskip("psycopg")
        from campusguard.app.alerts.postgres.ledger import PgDeliveryLedger
        from campusguard.app.alerts.postgres.outbox import PgOutbox

        url = str(request.getfixturevalue("postgres_url"))
        if request.param == "postgresql ledger":
            pg = PgDeliveryLedger(url, "s")
            yield pg.record, pg.delivered
            pg.close()
        else:
            outbox = PgOutbox(url, "s")
            yield (lambda ev: outbox.add_once("t", b"{}", ev)), outbox.published
            outbox.close()


@pytest.mark.parametrize(("recorded", "asked", "same"), _SAME_DELIVERY)
def test_every_ledger_follows_the_delivery_key(
    answerer: Answerer, make_event, recorded: tuple[str, int], asked: tuple[str, int], same: bool
) -> None:
    record, delivered = answerer
    record(make_event(phase=recorded[0], sequence=recorded[1], end_s=20.0 if recorded[0] == "end" else None))
    assert delivered(make_event(phase=asked[0], sequence=asked[1], end_s=20.0 if asked[0] == "end" else None)) is same


def test_a_restarted_webhook_posts_each_update_once_and_the_body_carries_the_sequence(
    tmp_path: Path, make_event, receiver_factory
) -> None:
    receiver = receiver_factory()
    for _ in range(2):
        sink = WebhookSink(
            receiver.url,
            dead_letter_path=tmp_path / "dead.jsonl",
            ledger=DeliveryLedger(tmp_path / "d.db", f"webhook:{receiver.url}"),
        )
        for ev in _incident(make_event):
            sink.send(ev)
        sink.close()
        time.sleep(0.1)
    assert [(r["phase"], r["sequence"]) for r in receiver.received] == [("start", 0), ("update", 1), ("end", 2)]
