"""Issue 43: alert delivery state in PostgreSQL, shared by the nodes of one database.

Several "nodes" here are several instances (stores, relays, sinks, escalators) over one fresh schema
of the real server, each with its own connections, as separate processes have. Delivery goes to a
real loopback HTTP receiver. The checks: an update is delivered exactly once whichever node relays
and sends it; an update a node stored but never relayed is delivered by another; a message whose
sender lost its connection mid-send is sent by another; an escalation deadline a dead node set fires
once on a survivor.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("psycopg")

import psycopg  # noqa: E402
from polling import wait_until  # noqa: E402 - tests/app is on the path (conftest)

from campusguard.app.alerts.escalation import EscalationRule, Escalator  # noqa: E402
from campusguard.app.alerts.postgres.deadlines import PgDeadlines  # noqa: E402
from campusguard.app.alerts.postgres.ledger import PgDeliveryLedger  # noqa: E402
from campusguard.app.alerts.postgres.outbox import PgOutbox  # noqa: E402
from campusguard.app.alerts.registry import SINKS  # noqa: E402
from campusguard.app.alerts.spec import SinkContext  # noqa: E402
from campusguard.app.alerts.webhook import WebhookSink, WebhookSinkConfig  # noqa: E402
from campusguard.app.engine.writer import EventWorker  # noqa: E402
from campusguard.app.events.pgsession import RetryPolicy  # noqa: E402
from campusguard.app.events.postgres import PostgresEventStore  # noqa: E402
from campusguard.app.events.types import Event  # noqa: E402

FAST = RetryPolicy(budget_s=2.0, initial_s=0.05, max_s=0.2)


class HoldingReceiver:
    """A loopback webhook receiver counting every accepted (2xx) body; ``hold`` makes the next request
    wait until `let_go` and then answer 500 (a send that did not get through)."""

    def __init__(self) -> None:
        self.accepted: list[dict[str, Any]] = []
        self.requests = 0
        self._lock = threading.Lock()
        self._holding = False
        self.held = threading.Event()  # a held request arrived
        self._let_go = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server API
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                with outer._lock:
                    outer.requests += 1
                    hold, outer._holding = outer._holding, False
                if hold:
                    outer.held.set()
                    outer._let_go.wait(20)
                    status = 500
                else:
                    with outer._lock:
                        outer.accepted.append(body)
                    status = 200
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def hold_next(self) -> None:
        with self._lock:
            self._holding = True

    def let_go(self) -> None:
        self._let_go.set()

    def keys(self) -> list[tuple[str, str, int]]:
        with self._lock:
            return [(b["event_id"], b["phase"], int(b["sequence"])) for b in self.accepted]

    def stop(self) -> None:
        self._let_go.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[HoldingReceiver]:
    r = HoldingReceiver()
    yield r
    r.stop()


def _webhook(url: str, pg: str, tmp_path: Path, node: str, **kwargs: Any) -> WebhookSink:
    """One node's webhook sink over the shared tables (its dead letters stay a file of its own)."""
    return WebhookSink(
        url,
        dead_letter_path=tmp_path / f"{node}.dead-letter.jsonl",
        outbox=PgOutbox(pg, "hook", retry=FAST, what="webhook outbox"),
        ledger=PgDeliveryLedger(pg, "webhook:hook", retry=FAST),
        backoff_s=0.05,
        backoff_max_s=0.2,
        timeout_s=5.0,
        **kwargs,
    )


def _incident(make_event: Callable[..., Event], i: int) -> list[Event]:
    start = make_event(event_id=f"inc{i:03d}", phase="start", sequence=0)
    end = make_event(event_id=f"inc{i:03d}", phase="end", sequence=1, end_s=20.0, end_frame=200)
    return [start, end]


def _relay_rows(pg: str) -> int:
    with psycopg.connect(pg) as conn:
        row = conn.execute("SELECT COUNT(*) FROM alert_relay").fetchone()
    return int(row[0]) if row else 0


# the relay ------------------------------------------------------------------------------------------
def test_the_update_and_its_relay_row_commit_together_and_the_relay_hands_it_on_once(postgres_url, make_event):
    store = PostgresEventStore(postgres_url, retry=FAST)
    got: list[Event] = []
    try:
        event = make_event()
        store.record(event)
        assert _relay_rows(postgres_url) == 1 and store.get(event.event_id) is not None
        relay = store.open_relay(got.append)
        assert relay.relay_once() == 1
        assert relay.relay_once() == 0
        relay.close()
    finally:
        store.close()
    assert [(e.event_id, e.phase) for e in got] == [(event.event_id, "start")]
    assert _relay_rows(postgres_url) == 0


def test_an_update_a_sink_could_not_take_stays_queued_and_goes_on_later(postgres_url, make_event):
    from campusguard.app.events.protocols import StoreUnavailableError

    store = PostgresEventStore(postgres_url, retry=FAST)
    got: list[Event] = []
    away = [True]

    def send(event: Event) -> None:  # a sink whose shared outbox is unreachable, then back
        if away[0]:
            raise StoreUnavailableError("outbox away")
        got.append(event)

    relay = store.open_relay(send)
    try:
        for e in _incident(make_event, 3):
            store.record(e)
        assert relay.relay_once() == 0 and _relay_rows(postgres_url) == 2
        away[0] = False
        assert relay.relay_once() == 1 and relay.relay_once() == 1  # the start, then its end
    finally:
        relay.close()
        store.close()
    assert [(e.event_id, e.phase) for e in got] == [("inc003", "start"), ("inc003", "end")]


def test_rows_one_relay_is_handing_on_are_skipped_by_the_others(postgres_url, make_event):
    store = PostgresEventStore(postgres_url, retry=FAST)
    inside, release = threading.Event(), threading.Event()
    got_a: list[Event] = []
    got_b: list[Event] = []

    def slow_send(event: Event) -> None:  # node A is in the middle of handing the update on
        inside.set()
        release.wait(10)
        got_a.append(event)

    relay_a, relay_b = store.open_relay(slow_send), store.open_relay(got_b.append)
    try:
        store.record(make_event())
        worker = threading.Thread(target=relay_a.relay_once)
        worker.start()
        assert inside.wait(10)
        assert relay_b.relay_once() == 0  # held by A: skipped, not waited for, not sent again
        release.set()
        worker.join(10)
        assert relay_b.relay_once() == 0  # A deleted it in the transaction that held it
    finally:
        release.set()
        relay_a.close()
        relay_b.close()
        store.close()
    assert len(got_a) == 1 and got_b == []


def test_an_update_a_node_stored_and_never_relayed_is_delivered_by_another(postgres_url, make_event, receiver, tmp_path):
    node_a = PostgresEventStore(postgres_url, retry=FAST)
    for e in _incident(make_event, 1):
        node_a.record(e)
    node_a.close()  # node A is gone before its relay ran: the updates are queued in the database
    assert _relay_rows(postgres_url) == 2

    node_b = PostgresEventStore(postgres_url, retry=FAST)
    sink_b = _webhook(receiver.url, postgres_url, tmp_path, "b")
    relay_b = node_b.open_relay(sink_b.send).start()
    try:
        assert wait_until(lambda: len(receiver.keys()) == 2, 15)
    finally:
        relay_b.close()
        sink_b.close()
        node_b.close()
    assert receiver.keys() == [("inc001", "start", 0), ("inc001", "end", 1)]


def test_the_writer_of_a_relaying_store_alerts_through_the_relay_only(postgres_url, make_event):
    """The event worker never calls the sinks itself on PostgreSQL: one delivery per update."""
    import queue

    class Recording:
        def __init__(self) -> None:
            self.events: list[Event] = []

        def send(self, event: Event) -> None:
            self.events.append(event)

        def close(self, timeout_s: float = 5.0) -> None:
            return None

    sink = Recording()
    store = PostgresEventStore(postgres_url, retry=FAST)
    worker = EventWorker(queue.Queue(), store, [sink], ["cam0"], threading.Event())
    for e in _incident(make_event, 7):
        worker.handle(e)
    assert wait_until(lambda: len(sink.events) == 2, 5.0)
    worker.close()  # drains the relay, then closes the sinks and the store
    assert [(e.event_id, e.phase) for e in sink.events] == [("inc007", "start"), ("inc007", "end")]
    assert _relay_rows(postgres_url) == 0


# two nodes, one receiver -------------------------------------------------------------------------------
def test_two_nodes_storing_relaying_and_sending_at_once_deliver_each_update_exactly_once(
    postgres_url, make_event, receiver, tmp_path
):
    nodes = []
    for name in ("a", "b"):
        store = PostgresEventStore(postgres_url, retry=FAST)
        sink = _webhook(receiver.url, postgres_url, tmp_path, name, parallel=4)
        relay = store.open_relay(sink.send).start()
        nodes.append((store, sink, relay))
    incidents = 30

    def write(k: int) -> None:  # node k stores every other incident, the two at once
        store = nodes[k][0]
        for i in range(k, incidents, 2):
            for e in _incident(make_event, i):
                store.record(e)
                nodes[k][2].wake()

    writers = [threading.Thread(target=write, args=(k,)) for k in (0, 1)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(30)
    try:
        assert wait_until(lambda: len(receiver.keys()) >= 2 * incidents, 30.0)
        time.sleep(0.5)  # a second copy, if any, would come now
    finally:
        for store, sink, relay in nodes:
            relay.close()
            sink.close()
            store.close()
    keys = receiver.keys()
    assert max(Counter(keys).values()) == 1, "an update was delivered twice"
    assert len(keys) == 2 * incidents
    order = {k: n for n, k in enumerate(keys)}
    for i in range(incidents):  # each incident's start went before its end, whatever node sent which
        assert order[(f"inc{i:03d}", "start", 0)] < order[(f"inc{i:03d}", "end", 1)]
    assert nodes[0][1].delivered > 0 and nodes[1][1].delivered > 0  # both nodes did deliver


def test_an_update_relayed_twice_is_put_into_the_outbox_once(postgres_url, make_event):
    a = PgOutbox(postgres_url, "hook", retry=FAST)
    b = PgOutbox(postgres_url, "hook", retry=FAST)
    try:
        event = make_event()
        assert a.add_once(event.event_id, b"{}", event) == (True, 0)
        assert b.add_once(event.event_id, b"{}", event) == (False, 0)  # another node, the same update
        late_end = make_event(phase="end", sequence=5, end_s=20.0)
        other_end = make_event(phase="end", sequence=6, end_s=21.0)
        assert b.add_once(event.event_id, b"{}", late_end)[0]
        assert not a.add_once(event.event_id, b"{}", other_end)[0]  # an incident ends once
        assert len(a) == len(b) == 2
    finally:
        a.close()
        b.close()


def test_a_claimed_message_is_not_claimed_by_another_node_until_its_claim_ends(postgres_url, make_event):
    a = PgOutbox(postgres_url, "hook", retry=FAST)
    b = PgOutbox(postgres_url, "hook", retry=FAST)
    try:
        start = make_event()
        end = make_event(phase="end", sequence=1, end_s=20.0)
        a.add_once(start.event_id, b"start", start)
        a.add_once(end.event_id, b"end", end)
        [claimed] = a.due(1)
        assert claimed.payload == b"start"
        assert b.due(5) == []  # the start is held by A, and the end waits behind it (one incident, in order)
        a.retry(claimed.seq, time.time() - 1, "HTTP 500")  # A's attempt failed: held for a retry (due now)
        [again] = b.due(1)
        assert again.payload == b"start" and again.attempts == 1
        b.remove([again.seq])
        [then] = a.due(1)
        assert then.payload == b"end"
        a.release([then.seq])
        assert len(a) == 1
    finally:
        a.close()
        b.close()


def test_a_message_whose_sender_lost_its_connection_mid_send_is_sent_by_another_node(
    postgres_url, make_event, receiver, tmp_path
):
    sink_a = _webhook(receiver.url, postgres_url, tmp_path, "a")
    sink_b: WebhookSink | None = None
    try:
        receiver.hold_next()
        sink_a.send(make_event(event_id="held"))
        assert receiver.held.wait(10), "node A did not send"
        # node A's claim connection dies while its request is in flight (a node cut off from the database)
        assert isinstance(sink_a.outbox, PgOutbox)
        pids = {claim.conn.info.backend_pid for claim in sink_a.outbox._claims.values()}
        assert len(pids) == 1
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pids.pop(),))
        sink_b = _webhook(receiver.url, postgres_url, tmp_path, "b")
        assert wait_until(lambda: receiver.keys() == [("held", "start", 0)], 15)
        receiver.let_go()  # A's request now fails (500): its lost claim must not send it again
        time.sleep(0.6)
        assert receiver.keys() == [("held", "start", 0)]
        assert sink_b.delivered == 1 and sink_a.delivered == 0
        assert sink_b.pending == 0
    finally:
        receiver.let_go()
        sink_a.close(1.0)
        if sink_b is not None:
            sink_b.close(1.0)


def test_the_registry_builds_sinks_over_the_shared_tables_when_the_store_is_postgresql(postgres_url, tmp_path):
    ctx = SinkContext(sqlite=tmp_path / "events.db", out=None, postgresql=postgres_url)  # type: ignore[arg-type]
    sink = SINKS.build(WebhookSinkConfig(url="http://127.0.0.1:9/hook", name="duty"), ctx)
    try:
        assert isinstance(sink, WebhookSink)
        assert isinstance(sink.outbox, PgOutbox) and sink.outbox.sink == "duty"
        assert isinstance(sink.ledger, PgDeliveryLedger)
        assert not (tmp_path / "events.duty.outbox.db").exists()
    finally:
        sink.close(0.5)


# escalation deadlines --------------------------------------------------------------------------------
class _Collect:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.lock = threading.Lock()

    def send(self, event: Event) -> None:
        with self.lock:
            self.events.append(event)

    def close(self, timeout_s: float = 5.0) -> None:
        return None


def test_an_escalation_due_on_a_dead_node_fires_once_on_the_survivors(postgres_url, make_event):
    rules = {("cam0", "no entry"): EscalationRule(after_s=0.2, to=("duty",))}
    started = datetime.now(UTC) - timedelta(seconds=5)
    dead_sink = _Collect()
    dead = Escalator(PgDeadlines(postgres_url, retry=FAST), rules, {"duty": dead_sink}, lambda _: "open", tick_s=3600)
    for i in range(20):
        dead.send(make_event(event_id=f"esc{i:02d}", started_at=started))
    dead.close()  # node A is gone before its deadlines were checked
    survivors = [_Collect(), _Collect()]
    escalators = [
        Escalator(PgDeadlines(postgres_url, retry=FAST), rules, {"duty": s}, lambda _: "open", tick_s=0.02)
        for s in survivors
    ]
    try:
        assert wait_until(lambda: sum(len(s.events) for s in survivors) >= 20, 10.0)
        time.sleep(0.3)
        assert all(e.pending() == 0 for e in escalators)
    finally:
        for e in escalators:
            e.close()
    fired = Counter(e.event_id for s in survivors for e in s.events)
    assert dead_sink.events == []
    assert fired == Counter({f"esc{i:02d}": 1 for i in range(20)})
    assert all(e.phase == "escalation" for s in survivors for e in s.events)


def test_an_acknowledged_incident_is_not_escalated_by_any_node(postgres_url, make_event):
    rules = {("cam0", "no entry"): EscalationRule(after_s=0.0, to=("duty",))}
    sink = _Collect()
    escalator = Escalator(PgDeadlines(postgres_url, retry=FAST), rules, {"duty": sink}, lambda _: "acknowledged", tick_s=3600)
    try:
        escalator.send(make_event(started_at=datetime.now(UTC)))
        assert escalator.check() == 0 and escalator.cancelled == 1 and escalator.pending() == 0
    finally:
        escalator.close()
    assert sink.events == []


# the wiring: a PostgreSQL config ---------------------------------------------------------------------
def test_a_postgresql_config_alerts_through_the_relay_with_shared_outbox_and_deadlines(
    postgres_url, make_event, receiver, tmp_path
):
    """Two processes wired from one config, one as `watch` (its writer relays), one as a node of the
    site (the node's relay sends for a camera writer without sinks): each update reaches the webhook
    once, the escalation once, and no SQLite outbox, ledger or deadlines file is made."""
    import io
    import queue

    from campusguard.app.config import parse_config
    from campusguard.app.engine.wiring import open_alert_relay, open_store_and_sinks

    text = f"""\
cameras:
  - id: cam1
    source: {tmp_path / "v.mp4"}
    zones:
      - name: gate
        polygon: [[0, 0], [10, 0], [10, 10], [0, 10]]
    rules:
      - kind: intrusion
        name: night
        zone: gate
        escalate: {{after_s: 0.3, to: [duty]}}
alerts:
  - kind: webhook
    name: duty
    url: {receiver.url}
    backoff_s: 0.05
storage:
  sqlite: {tmp_path / "events.db"}
  postgresql: "{postgres_url}"
"""
    loaded = parse_config(text, "c.yaml")
    # node A as `watch` runs: its event writer holds the sinks and runs the relay itself
    store_a, sinks_a = open_store_and_sinks(loaded, io.StringIO())
    assert isinstance(sinks_a[0], Escalator) and isinstance(sinks_a[1], WebhookSink)
    assert isinstance(sinks_a[1].outbox, PgOutbox)
    writer_a = EventWorker(queue.Queue(), store_a, sinks_a, ["cam1"], threading.Event())
    # node B as a node of the site runs: the node holds the sinks and their relay, its camera's writer none
    store_b, sinks_b = open_store_and_sinks(loaded, io.StringIO())
    relay_b = open_alert_relay(store_b, sinks_b)
    assert relay_b is not None
    writer_b = EventWorker(queue.Queue(), store_b, [], ["cam1"], threading.Event(), close_store=False)
    start = make_event(camera_id="cam1", rule_name="night", started_at=datetime.now(UTC))
    end = make_event(camera_id="cam1", rule_name="night", phase="end", sequence=1, end_s=20.0)
    writer_b.handle(start)
    writer_b.handle(end)
    time.sleep(0.4)
    assert _relay_rows(postgres_url) == 2 and receiver.keys() == []  # a writer without sinks relays nothing
    relay_b.start()
    writer_a.handle(start)  # a replay of the same update on another node
    try:
        assert wait_until(lambda: len(receiver.keys()) >= 3, 15.0)
        time.sleep(0.5)
    finally:
        writer_a.close()
        writer_b.close()
        relay_b.close()
        for sink in sinks_b:
            sink.close()
        store_b.close()
    assert sorted(receiver.keys()) == [("e1", "end", 1), ("e1", "escalation", 0), ("e1", "start", 0)]
    assert receiver.keys().index(("e1", "start", 0)) < receiver.keys().index(("e1", "end", 1))
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".db") == []


_NODE = """
import sys, time
from campusguard.app.alerts.postgres.ledger import PgDeliveryLedger
from campusguard.app.alerts.postgres.outbox import PgOutbox
from campusguard.app.alerts.webhook import WebhookSink
from campusguard.app.events.postgres import PostgresEventStore
from campusguard.app.events.types import Event

pg, url, dead = sys.argv[1:4]
store = PostgresEventStore(pg)
outbox, ledger = PgOutbox(pg, "hook"), PgDeliveryLedger(pg, "webhook:hook")
sink = WebhookSink(url, dead_letter_path=dead, outbox=outbox, ledger=ledger, parallel=1)
relay = store.open_relay(sink.send).start()
for i in range(10):
    base = dict(camera_id="cam0", rule_name="r", rule_kind="intrusion", zone="z", start_s=1.0, event_id=f"k{i}")
    store.record(Event(phase="start", sequence=0, **base))
    store.record(Event(phase="end", sequence=1, end_s=2.0, **base))
print("stored", flush=True)
time.sleep(60)
"""


def test_a_node_killed_mid_send_leaves_nothing_undelivered_and_nothing_twice(postgres_url, receiver, tmp_path):
    """A real process SIGKILLed while its one webhook request is in flight (not answered): its session
    ends, so its claim and whatever it had not relayed or sent go to the survivor; each update reaches
    the receiver once. (A kill after the receiver answered but before the delete committed repeats that
    message: at least once there, see `PgOutbox`.)"""
    import os
    import signal
    import subprocess
    import sys

    receiver.hold_next()  # the dead node's first request never gets an answer before the kill
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    child = subprocess.Popen(
        [sys.executable, "-c", _NODE, postgres_url, receiver.url, str(tmp_path / "a.dead-letter.jsonl")],
        stdout=subprocess.PIPE,
        env=env,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"stored"
        assert receiver.held.wait(20), "the node did not send"
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    survivor = PostgresEventStore(postgres_url, retry=FAST)
    sink = _webhook(receiver.url, postgres_url, tmp_path, "b", parallel=4)
    relay = survivor.open_relay(sink.send).start()
    try:
        assert wait_until(lambda: len(receiver.keys()) >= 20, 20.0), receiver.keys()
        receiver.let_go()  # the dead node's request ends (500): nothing counts it delivered
        time.sleep(0.5)
    finally:
        relay.close()
        sink.close()
        survivor.close()
    keys = receiver.keys()
    assert max(Counter(keys).values()) == 1
    assert sorted(keys) == sorted((f"k{i}", p, s) for i in range(10) for p, s in (("start", 0), ("end", 1)))


def test_a_kept_claim_connection_the_server_dropped_is_replaced(postgres_url, make_event):
    outbox = PgOutbox(postgres_url, "hook", retry=FAST)
    try:
        first = make_event(event_id="one")
        outbox.add_once("one", b"1", first)
        [m] = outbox.due(1)
        outbox.remove([m.seq])  # the claim commits; its connection is kept for the next
        [kept] = outbox._idle
        with psycopg.connect(postgres_url, autocommit=True) as admin:  # a server restart, as a client sees it
            admin.execute("SELECT pg_terminate_backend(%s)", (kept.info.backend_pid,))
        outbox.add_once("two", b"2", make_event(event_id="two"))
        [again] = outbox.due(1)
        assert again.payload == b"2"
        outbox.remove([again.seq])
        assert len(outbox) == 0
    finally:
        outbox.close()
