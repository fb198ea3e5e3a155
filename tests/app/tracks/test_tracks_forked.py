"""`run_forked`: results in order from forked children, their exceptions raised in the parent, and
the work done here when forking is not safe (another thread runs)."""

from __future__ import annotations

import os
import threading

import pytest

from campusguard.app.tracks.forked import can_fork, run_forked

pytestmark = pytest.mark.skipif(not can_fork(), reason="needs the fork start method and no other thread")


def _pid_and(value: int) -> tuple[int, int]:
    return os.getpid(), value


def test_results_come_back_in_order_from_other_processes() -> None:
    results = run_forked([lambda k=k: _pid_and(k * k) for k in range(3)])
    assert [v for _, v in results] == [0, 1, 4]
    pids = [pid for pid, _ in results]
    assert pids[0] == os.getpid() and len(set(pids)) == 3


def test_a_childs_exception_is_raised_here() -> None:
    def boom() -> int:
        raise ValueError("from the child")

    with pytest.raises(ValueError, match="from the child"):
        run_forked([lambda: 1, boom])


def test_with_another_thread_running_everything_runs_here() -> None:
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, args=(10,), daemon=True)
    other.start()
    try:
        assert not can_fork()
        assert {pid for pid, _ in run_forked([lambda: _pid_and(1), lambda: _pid_and(2)])} == {os.getpid()}
    finally:
        stop.set()
        other.join(10)
