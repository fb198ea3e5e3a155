"""Alert latency through the PostgreSQL relay against the SQLite path, side by side.

One process, one event writer (`EventWorker.handle`: commit, then alert), one webhook sink, a
loopback HTTP receiver. Measured per update: how long the writer's ``handle`` takes (what the
pipeline waits for) and the time from ``handle`` to the receiver's answer (what an operator
waits for), for

- ``sqlite``: a SQLite store; the writer puts the update into the sink's SQLite outbox itself;
- ``postgresql``: a PostgreSQL store; the update and its relay row are one statement, the relay
  thread (woken by the writer) puts it into the shared PostgreSQL outbox, whose sender claims it
  (``FOR UPDATE SKIP LOCKED``) while it posts.

    python benchmarks/alert_relay.py --updates 200

PostgreSQL is ``--postgres`` (default ``CAMPUSGUARD_TEST_POSTGRES`` or
``postgresql://postgres@127.0.0.1:5432/test``); the run uses a fresh schema and drops it.
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "app"))  # the webhook receiver the tests use

from webhook_receiver import WebhookReceiver  # noqa: E402

from campusguard.app.alerts.spec import SinkContext
from campusguard.app.alerts.webhook import WebhookSink
from campusguard.app.engine.writer import EventWorker
from campusguard.app.events import Event, open_event_store

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


def _event(i: int, phase: str) -> Event:
    return Event(
        event_id=f"bench{i:05d}",
        phase=phase,  # type: ignore[arg-type]
        camera_id="cam0",
        rule_name="gate",
        rule_kind="intrusion",
        zone="z",
        start_s=1.0,
        end_s=2.0 if phase == "end" else None,
        sequence=0 if phase == "start" else 1,
    )


def run(backend: str, target: str, folder: Path, updates: int, gap_s: float) -> dict[str, Any]:
    receiver = WebhookReceiver()
    store = open_event_store(target)
    ctx = SinkContext(
        sqlite=folder / f"{backend}.db", out=None, postgresql=target if backend == "postgresql" else None  # type: ignore[arg-type]
    )
    sink = WebhookSink(
        receiver.url,
        dead_letter_path=folder / f"{backend}.dead-letter.jsonl",
        outbox=ctx.open_outbox(folder / f"{backend}.outbox.db", "bench", what="webhook outbox"),
        ledger=ctx.open_ledger("webhook:bench"),
    )
    worker = EventWorker(queue.Queue(), store, [sink], ["cam0"], threading.Event())
    sent: dict[tuple[str, str], float] = {}
    handle_ms: list[float] = []
    try:
        for k in range(updates):
            event = _event(k // 2, "start" if k % 2 == 0 else "end")
            t0 = time.monotonic()
            worker.handle(event)
            handle_ms.append((time.monotonic() - t0) * 1000)
            sent[(event.event_id, event.phase)] = t0
            time.sleep(gap_s)
        deadline = time.monotonic() + 30
        while len(receiver.arrived) < updates and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        worker.close()
        receiver.stop()
    alert_ms = [(receiver.arrived[k] - t) * 1000 for k, t in sent.items() if k in receiver.arrived]
    return {
        "backend": backend,
        "delivered": len(alert_ms),
        "posts": receiver.attempts,
        "handle_p50": statistics.median(handle_ms),
        "handle_p95": statistics.quantiles(handle_ms, n=20)[18],
        "alert_p50": statistics.median(alert_ms),
        "alert_p95": statistics.quantiles(alert_ms, n=20)[18],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--updates", type=int, default=200, help="updates written (start and end of half as many incidents)")
    ap.add_argument("--gap-s", type=float, default=0.01, help="pause between two updates (seconds)")
    ap.add_argument("--postgres", default=os.environ.get("CAMPUSGUARD_TEST_POSTGRES") or DEFAULT_POSTGRES)
    args = ap.parse_args()
    import psycopg

    schema = f"cg_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(args.postgres, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in args.postgres else "?"
    pg = f"{args.postgres}{sep}options={quote(f'-csearch_path={schema}')}"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rows = [
                run("sqlite", str(Path(tmp) / "events.db"), Path(tmp), args.updates, args.gap_s),
                run("postgresql", pg, Path(tmp), args.updates, args.gap_s),
            ]
    finally:
        with psycopg.connect(args.postgres, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    print(f"{args.updates} updates, {args.gap_s * 1000:.0f} ms apart, one process, loopback webhook")
    print("| store | delivered | POSTs | handle p50 ms | handle p95 ms | to receiver p50 ms | to receiver p95 ms |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['backend']} | {r['delivered']} | {r['posts']} | {r['handle_p50']:.2f} | {r['handle_p95']:.2f} "
            f"| {r['alert_p50']:.2f} | {r['alert_p95']:.2f} |"
        )
    sq, pq = rows
    print(
        f"postgresql/sqlite: handle p50 x{pq['handle_p50'] / sq['handle_p50']:.2f}, "
        f"to receiver p50 x{pq['alert_p50'] / sq['alert_p50']:.2f}"
    )


if __name__ == "__main__":
    main()
