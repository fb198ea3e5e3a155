"""`run_forked`: independent pieces of work on several cores, the others in forked child processes.

Replay splits a segment's rules into groups fed side by side (`campusguard.app.tracks.replay`). A
forked child starts with the parent's memory (the decoded tracks, the built rules), so nothing but
the results crosses a pipe. Forking is only safe in a process without other threads (a lock held by
another thread stays held in the child): `can_fork` says when it is; otherwise the work runs here,
one piece after the other.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any, TypeVar

from campusguard.errors import CampusGuardError

__all__ = ["ForkedWorkError", "can_fork", "run_forked", "usable_cores"]

T = TypeVar("T")

_CHILD_WAIT_S = 10.0
"""How long the parent waits for a child to exit once its result came (it exits right after sending)."""


class ForkedWorkError(CampusGuardError):
    """A forked child died without sending its result back (killed, out of memory)."""


def can_fork() -> bool:
    """True when this process may fork: the ``fork`` start method exists and no other Python thread runs."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def usable_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _child(conn: Connection, job: Callable[[], Any]) -> None:
    try:
        conn.send((True, job()))
    except BaseException as exc:  # the parent re-raises it
        conn.send((False, exc))
    finally:
        conn.close()


def run_forked(jobs: Sequence[Callable[[], T]]) -> list[T]:
    """Every job's result, in order: the first job runs in this process, the others in forked children
    at the same time (all here, in turn, when `can_fork` is False). A job's exception is raised here.

    Raises:
        ForkedWorkError: a child died without a result.
    """
    if len(jobs) <= 1 or not can_fork():
        return [job() for job in jobs]
    ctx = multiprocessing.get_context("fork")
    children = []
    for job in jobs[1:]:
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(send, job), daemon=True)
        proc.start()
        send.close()
        children.append((proc, receive))
    try:
        results = [jobs[0]()]
        for proc, receive in children:
            try:
                ok, value = receive.recv()
            except EOFError:
                raise ForkedWorkError(f"a replay worker (pid {proc.pid}) died without a result") from None
            if not ok:
                raise value
            results.append(value)
        return results
    finally:
        for proc, receive in children:
            receive.close()
            proc.join(_CHILD_WAIT_S)
            if proc.is_alive():
                proc.kill()
                proc.join(_CHILD_WAIT_S)
