"""Waiting in tests for something another thread or process makes true."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_until(predicate: Callable[[], Any], timeout_s: float = 20.0, step_s: float = 0.02) -> bool:
    """Poll ``predicate`` every ``step_s`` until it is true, at most ``timeout_s`` seconds; its last answer."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step_s)
    return bool(predicate())
