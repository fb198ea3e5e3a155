"""What the console's identity costs per request: SQLite file against the shared PostgreSQL, side by side.

Every authenticated request resolves its token once (`IdentityStore.resolve`: one read), and
every login counts or clears its failures and makes a session (writes). This times, on the same
machine and in the same run, with ``--threads`` callers at once (request handlers run in a
thread pool):

- ``resolve``: a session token's credential (one SELECT; PostgreSQL: one round trip);
- ``session``: `create_session` (one write transaction, fsync'd / ``synchronous_commit=on``);
- ``failure``: one failed login counted by `LoginLimiter` (memory for SQLite as `serve` does;
  the shared ``console_login_failures`` table for PostgreSQL).

It prints calls per second for each store and the ratio PostgreSQL / SQLite. The PostgreSQL
store is the server of ``CAMPUSGUARD_TEST_POSTGRES`` (default the test server), in a fresh
schema dropped afterwards.

    python benchmarks/identity_resolve.py --seconds 2 --threads 1 4
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from argon2 import PasswordHasher

from campusguard.app.console.identity.auth import LoginLimiter
from campusguard.app.console.identity.postgres import PostgresUserStore
from campusguard.app.console.identity.store import IdentityStore
from campusguard.app.console.identity.users import UserStore

CHEAP = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)


def rate(call: Callable[[int], object], seconds: float, threads: int) -> float:
    """Calls per second of ``call(i)`` from ``threads`` threads for about ``seconds``."""
    counts = [0] * threads
    stop = time.monotonic() + seconds

    def worker(k: int) -> None:
        i = 0
        while time.monotonic() < stop:
            call(k * 10_000_000 + i)
            i += 1
        counts[k] = i

    started = time.monotonic()
    pool = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return sum(counts) / (time.monotonic() - started)


def measure(store: IdentityStore, seconds: float, threads: int) -> dict[str, float]:
    token, _ = store.create_session("ada")
    limiter = LoginLimiter(failures=store.login_failures(), max_keys=100_000)
    return {
        "resolve": rate(lambda i: store.resolve(token), seconds, threads),
        "session": rate(lambda i: store.create_session("ada"), seconds, threads),
        "failure": rate(lambda i: limiter.failed(f"user{i % 500}", f"10.0.{i % 200}.1"), seconds, threads),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per measurement")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 4], help="concurrent callers")
    args = parser.parse_args()
    import psycopg

    server = os.environ.get("CAMPUSGUARD_TEST_POSTGRES") or "postgresql://postgres@127.0.0.1:5432/test"
    schema = f"cg_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    url = f"{server}{'&' if '?' in server else '?'}options={quote(f'-csearch_path={schema}')}"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            stores: dict[str, IdentityStore] = {
                "sqlite": UserStore(Path(tmp) / "users.db", password_hasher=CHEAP),
                "postgresql": PostgresUserStore(url, password_hasher=CHEAP),
            }
            for store in stores.values():
                store.add_user("ada", "admin", "admin-pass-1")
            print(f"{'threads':>7} {'operation':>9} {'sqlite /s':>10} {'postgresql /s':>14} {'pg/sqlite':>10}")
            for threads in args.threads:
                results = {name: measure(store, args.seconds, threads) for name, store in stores.items()}
                for op in ("resolve", "session", "failure"):
                    lite, pg = results["sqlite"][op], results["postgresql"][op]
                    print(f"{threads:>7} {op:>9} {lite:>10.0f} {pg:>14.0f} {pg / lite:>10.2f}")
            for store in stores.values():
                store.close()
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


if __name__ == "__main__":
    main()
