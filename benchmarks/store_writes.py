"""Event store write throughput: ``record`` on SQLite and on PostgreSQL, side by side.

Each writer is a thread with its own store (its own connection, as each worker or Ray actor has)
recording full incident lifecycles: one ``start``, ``--updates`` ``update`` and one ``end``, each
a committed write (SQLite: WAL with ``synchronous=FULL``; PostgreSQL: ``synchronous_commit=on``,
the server's own fsync settings). Reported: committed writes per second over all writers, and the
50th, 95th and 99th percentile latency of one ``record`` call (with several SQLite writers most
calls are quick and a few wait out the file lock: look at p99, not the median).

    python benchmarks/store_writes.py --incidents 200 --updates 3 --writers 1,4,8 --rounds 5 \\
        --out docs/results/store-writes-cpu.md

PostgreSQL is the server ``--postgres`` (default ``CAMPUSGUARD_TEST_POSTGRES`` or
``postgresql://postgres@127.0.0.1:5432/test``); the run writes into a fresh schema and drops it.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from campusguard.app.events import Event, ReviewableEventStore, open_event_store
from campusguard.app.events.types import event_id_for
from campusguard.doctor import cpu_name  # noqa: E402

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


@dataclass(frozen=True)
class Result:
    """One backend at one writer count."""

    backend: str
    writers: int
    writes: int
    seconds: float
    latencies_ms: list[float]
    failures: list[str] = field(default_factory=list)

    @property
    def writes_per_s(self) -> float:
        return self.writes / self.seconds

    def percentile_ms(self, q: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def lifecycle(writer: int, n: int, updates: int) -> list[Event]:
    """The ``start``, ``updates`` x ``update`` and ``end`` of incident ``n`` of ``writer``."""
    start_s = float(n)
    eid = event_id_for(camera_id=f"cam{writer}", rule_name="no entry", zone="yard", start_frame=n * 10, start_s=start_s)
    common = {
        "event_id": eid,
        "camera_id": f"cam{writer}",
        "rule_name": "no entry",
        "rule_kind": "intrusion",
        "zone": "yard",
        "start_s": start_s,
        "onset_s": start_s - 1.0,
        "start_frame": n * 10,
        "class_ids": (0,),
        "class_names": ("person",),
        "details": {"dwell_s": 1.0},
    }
    out = [Event(phase="start", tracker_ids=(1,), count=1, **common)]  # type: ignore[arg-type]
    out += [Event(phase="update", tracker_ids=tuple(range(1, k + 2)), count=k + 1, **common) for k in range(updates)]  # type: ignore[arg-type]
    out.append(Event(phase="end", tracker_ids=(1,), count=1, end_s=start_s + 5, end_frame=n * 10 + 50, **common))  # type: ignore[arg-type]
    return out


def run(
    backend: str, open_store: Callable[[], ReviewableEventStore], writers: int, incidents: int, updates: int
) -> Result:
    """``writers`` threads, each with its own store, each recording ``incidents`` lifecycles."""
    stores = [open_store() for _ in range(writers)]
    work = [[ev for n in range(incidents) for ev in lifecycle(w, n, updates)] for w in range(writers)]
    latencies: list[list[float]] = [[] for _ in range(writers)]
    failures: list[list[str]] = [[] for _ in range(writers)]
    barrier = threading.Barrier(writers + 1)

    def write(w: int) -> None:
        barrier.wait()
        for ev in work[w]:
            t0 = time.perf_counter()
            try:
                stores[w].record(ev)
            except Exception as exc:  # noqa: BLE001 - counted and reported: e.g. SQLite's "database is locked"
                failures[w].append(f"{type(exc).__name__}: {exc}")
                continue
            latencies[w].append((time.perf_counter() - t0) * 1000)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    for s in stores:
        s.close()
    failed = [f for fs in failures for f in fs]
    return Result(
        backend, writers, sum(len(x) for x in latencies), seconds, [x for lat in latencies for x in lat], failed
    )


def table(results: list[Result]) -> list[str]:
    """Markdown rows: per writer count, the median writes/s over rounds (min-max) and the pooled latency percentiles."""
    lines = [
        "| writers | SQLite writes/s | PostgreSQL writes/s | SQLite p50 / p95 / p99 ms | PostgreSQL p50 / p95 / p99 ms |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]

    def rate(rs: list[Result]) -> str:
        if not rs:
            return "-"
        rates = [r.writes_per_s for r in rs]
        spread = f" ({min(rates):,.0f}-{max(rates):,.0f})" if len(rs) > 1 else ""
        failed = sum(len(r.failures) for r in rs)
        return f"{statistics.median(rates):,.0f}{spread}" + (f", **{failed} failed**" if failed else "")

    def lat(rs: list[Result]) -> str:
        if not rs:
            return "-"
        pooled = Result(rs[0].backend, rs[0].writers, 0, 1.0, [x for r in rs for x in r.latencies_ms])
        return " / ".join(f"{pooled.percentile_ms(q):.2f}" for q in (0.5, 0.95, 0.99))

    for w in sorted({r.writers for r in results}):
        s = [r for r in results if r.backend == "sqlite" and r.writers == w]
        p = [r for r in results if r.backend == "postgresql" and r.writers == w]
        lines.append(f"| {w} | {rate(s)} | {rate(p)} | {lat(s)} | {lat(p)} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--incidents", type=int, default=200, help="incidents per writer")
    ap.add_argument("--updates", type=int, default=3, help="updates per incident (writes = incidents x (updates + 2))")
    ap.add_argument("--writers", default="1,4", help="comma-separated writer counts")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (the disk is shared: report the median)")
    ap.add_argument("--postgres", default=os.environ.get("CAMPUSGUARD_TEST_POSTGRES") or DEFAULT_POSTGRES)
    ap.add_argument("--out", type=Path, default=None, help="also write the results as Markdown here")
    args = ap.parse_args()
    writer_counts = [int(x) for x in args.writers.split(",")]

    import psycopg

    schema = f"cg_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(args.postgres, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        server = conn.execute("SHOW server_version").fetchone()
        fsync = conn.execute("SHOW fsync").fetchone()
    sep = "&" if "?" in args.postgres else "?"
    pg_url = f"{args.postgres}{sep}options={quote(f'-csearch_path={schema}')}"
    results: list[Result] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            rounds = [(k, w) for k in range(args.rounds) for w in writer_counts]
            for k, w in rounds:  # SQLite then PostgreSQL at each writer count, each round: noise hits both alike
                db = Path(tmp) / f"events-{k}-{w}.db"
                results.append(run("sqlite", lambda db=db: open_event_store(db), w, args.incidents, args.updates))
                results.append(run("postgresql", lambda: open_event_store(pg_url), w, args.incidents, args.updates))
                with psycopg.connect(pg_url, autocommit=True) as conn:
                    conn.execute("TRUNCATE events")
    finally:
        with psycopg.connect(args.postgres, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    command = "python benchmarks/store_writes.py " + " ".join(sys.argv[1:])
    header = [
        f"CPU: {cpu_name()} ({os.cpu_count()} cores); PostgreSQL {server[0] if server else '?'} on 127.0.0.1 "
        f"(fsync={fsync[0] if fsync else '?'}), SQLite {sqlite3.sqlite_version} on local disk.",
        f"Each writer: {args.incidents} incidents x ({args.updates} updates + start + end) = "
        f"{args.incidents * (args.updates + 2)} committed `record` calls, its own store and connection; "
        f"{args.rounds} interleaved rounds: median writes/s (min-max), latency percentiles over all rounds.",
        "",
    ]
    body = table(results)
    failures = sorted({f"{r.backend}, {r.writers} writers: {f}" for r in results for f in r.failures})
    if failures:
        body += ["", "Failed writes (not committed; counted out of writes/s):", *(f"- {f}" for f in failures)]
    print("\n".join(header + body))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        text = ["# Event store writes: SQLite and PostgreSQL", "", f"    {command}", "", *header, *body, ""]
        args.out.write_text("\n".join(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
