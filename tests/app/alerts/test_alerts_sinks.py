"""Alert sinks: stdout, JSONL, fan-out; webhook retries, dead letters, recovery, never blocking."""

from __future__ import annotations

import io
import json
import time

import pytest
from polling import wait_until  # noqa: E402 - tests/app is on the path (conftest)

from campusguard.app.alerts import AlertSink, JsonlSink, MultiSink, StdoutSink, WebhookSink, format_event
from campusguard.app.events import read_events
from campusguard.errors import InvalidInputError


def _dead_ids(path) -> list[str]:
    if not path.exists():
        return []
    return [json.loads(line)["event"]["event_id"] for line in path.read_text().splitlines() if line.strip()]


def test_stdout_sink_and_phase_filter(make_event):
    buf = io.StringIO()
    sink = StdoutSink(buf, phases=("start",))
    assert isinstance(sink, AlertSink)
    sink.send(make_event())
    sink.send(make_event(phase="end", end_s=20.0))
    lines = buf.getvalue().splitlines()
    assert lines == [format_event(make_event())]
    assert lines[0].startswith(
        "[start] cam0 no entry(intrusion) zone=yard t=12.50s ids=[3, 7] classes=[person] count=2"
    )


def test_jsonl_sink_appends_readable_events(tmp_path, make_event):
    path = tmp_path / "out" / "alerts.jsonl"
    sink = JsonlSink(path)
    sink.send(make_event())
    sink.send(make_event(phase="end", end_s=20.0))
    sink.close()
    JsonlSink(path).close()  # reopening appends, never truncates
    assert len(path.read_text().splitlines()) == 2
    assert [(e.event_id, e.end_s) for e in read_events(path)] == [("e1", 20.0)]


def test_multisink_isolates_a_failing_sink(make_event):
    class Broken:
        def send(self, event):
            raise RuntimeError("boom")

        def close(self, timeout_s=5.0):
            raise RuntimeError("boom")

    buf = io.StringIO()
    multi = MultiSink([Broken(), StdoutSink(buf)])
    multi.send(make_event())
    multi.close()
    assert multi.errors == 2 and buf.getvalue().count("\n") == 1


def test_webhook_retries_through_500s_and_delivers_everything(tmp_path, make_event, receiver_factory):
    receiver = receiver_factory(fail_first=4)
    dead = tmp_path / "dead.jsonl"
    sink = WebhookSink(receiver.url, dead_letter_path=dead, retries=6, backoff_s=0.01)
    ids = [f"e{i}" for i in range(5)]
    for i in ids:
        sink.send(make_event(event_id=i))
    assert wait_until(lambda: len(receiver.ids) == 5)  # the retries run in the background, not in close
    sink.close(timeout_s=5)
    assert sorted(receiver.ids) == ids
    assert _dead_ids(dead) == [] and sink.delivered == 5 and sink.dead_lettered == 0


def test_webhook_dead_receiver_then_recovery_loses_nothing(tmp_path, make_event, receiver_factory, unused_port):
    dead = tmp_path / "dead.jsonl"
    url = f"http://127.0.0.1:{unused_port}/hook"
    sink = WebhookSink(url, dead_letter_path=dead, retries=1, backoff_s=0.01, timeout_s=2.0)
    first = [f"down-{i}" for i in range(3)]
    for i in first:
        sink.send(make_event(event_id=i))  # connection refused
    assert wait_until(lambda: sorted(_dead_ids(dead)) == first)
    receiver = receiver_factory(port=unused_port)  # the receiver comes back on the same port
    sink.send(make_event(event_id="up-0"))
    assert wait_until(lambda: len(receiver.ids) == 4)
    sink.close(timeout_s=10)
    assert sorted(receiver.ids) == sorted([*first, "up-0"])  # dead letters re-driven
    assert _dead_ids(dead) == [] and sink.redriven == 3


def test_webhook_never_blocks_and_keeps_what_it_could_not_deliver_for_the_next_run(
    tmp_path, make_event, receiver_factory, unused_port
):
    dead = tmp_path / "dead.jsonl"
    outbox = tmp_path / "hook.outbox.db"
    # a refused port with long back-off: nothing can be delivered during this run
    sink = WebhookSink(
        f"http://127.0.0.1:{unused_port}/", dead_letter_path=dead, outbox_path=outbox, backoff_s=5.0, timeout_s=1.0
    )
    ids = [f"e{i}" for i in range(10)]
    began = time.monotonic()
    for i in ids:
        sink.send(make_event(event_id=i))  # returns at once: committed to the outbox
    assert time.monotonic() - began < 1.0
    sink.send(make_event(event_id="e0"))  # the same update again (a replayed spool): put in once
    sink.close(timeout_s=0.5)  # nothing is due within the close: all stay in the outbox, none dead-lettered
    assert _dead_ids(dead) == [] and sink.delivered == 0
    receiver = receiver_factory(port=unused_port)
    again = WebhookSink(receiver.url, dead_letter_path=dead, outbox_path=outbox, backoff_s=0.01)
    again.send(make_event(event_id="e3"))  # already in the outbox from the first run
    assert wait_until(lambda: len(receiver.ids) >= 10)
    again.close(timeout_s=5)
    assert sorted(receiver.ids) == ids and again.pending == 0


def test_webhook_4xx_is_not_retried(tmp_path, make_event):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    hits = []

    class Reject(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            hits.append(1)
            self.send_response(400)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Reject)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        dead = tmp_path / "dead.jsonl"
        sink = WebhookSink(
            f"http://127.0.0.1:{server.server_address[1]}/", dead_letter_path=dead, retries=5, backoff_s=0.01
        )
        sink.send(make_event())
        sink.close(timeout_s=10)
        assert len(hits) == 1 and _dead_ids(dead) == ["e1"]
        assert json.loads(dead.read_text())["error"] == "HTTP 400"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"url": "ftp://x"}, "http"),
        ({"url": "http://x", "retries": -1}, "retries"),
        ({"url": "http://x", "timeout_s": 0}, "timeout_s"),
        ({"url": "http://x", "parallel": 0}, "parallel"),
        ({"url": "http://x", "max_age_s": 0}, "max_age_s"),
    ],
)
def test_webhook_validation(tmp_path, kwargs, message):
    with pytest.raises(InvalidInputError, match=message):
        WebhookSink(dead_letter_path=tmp_path / "d.jsonl", **kwargs)


def test_the_webhook_defaults_are_the_configs():
    """One default per setting: the class takes the config's (5 retries, once 3 in the class)."""
    import inspect

    from campusguard.app.alerts.webhook import WebhookSinkConfig

    params = inspect.signature(WebhookSink).parameters
    fields = WebhookSinkConfig.model_fields
    for name in ("retries", "backoff_s", "backoff_max_s", "max_age_s", "parallel", "timeout_s"):
        assert params[name].default == fields[name].default, name


def test_webhook_delivers_in_parallel_up_to_its_bound_and_each_incident_in_order(tmp_path, make_event):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    lock, state = threading.Lock(), {"now": 0, "most": 0}
    order: list[tuple[str, str]] = []

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            with lock:
                state["now"] += 1
                state["most"] = max(state["most"], state["now"])
            time.sleep(0.15)
            with lock:
                state["now"] -= 1
                order.append((body["event_id"], body["phase"]))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sink = WebhookSink(
            f"http://127.0.0.1:{server.server_address[1]}/", dead_letter_path=tmp_path / "d.jsonl", parallel=3
        )
        for i in range(6):
            sink.send(make_event(event_id=f"i{i}"))
            sink.send(make_event(event_id=f"i{i}", phase="end", end_s=20.0, sequence=1))
        assert wait_until(lambda: len(order) == 12)
        sink.close()
    finally:
        server.shutdown()
        server.server_close()
    assert state["most"] == 3  # parallel, and never more than the bound
    for i in range(6):
        assert order.index((f"i{i}", "start")) < order.index((f"i{i}", "end"))


def test_webhook_dead_letters_an_alert_older_than_max_age(tmp_path, make_event, unused_port):
    dead = tmp_path / "dead.jsonl"
    sink = WebhookSink(
        f"http://127.0.0.1:{unused_port}/", dead_letter_path=dead, backoff_s=0.05, backoff_max_s=0.05, max_age_s=0.4
    )
    sink.send(make_event(event_id="old"))
    time.sleep(0.2)
    assert _dead_ids(dead) == [] and sink.pending == 1  # still retried
    assert wait_until(lambda: _dead_ids(dead) == ["old"], 5.0)
    sink.close()
    assert sink.pending == 0 and "ConnectionRefusedError" in json.loads(dead.read_text())["error"]
