"""Shared app test helpers: the `make_event` factory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from campusguard.app.events import Event


def _make_event(**overrides: Any) -> Event:
    fields: dict[str, Any] = {
        "event_id": "e1",
        "phase": "start",
        "camera_id": "cam0",
        "rule_name": "no entry",
        "rule_kind": "intrusion",
        "zone": "yard",
        "start_s": 12.5,
        "onset_s": 11.5,
        "start_frame": 125,
        "tracker_ids": (3, 7),
        "class_ids": (0,),
        "class_names": ("person",),
        "count": 2,
    }
    fields.update(overrides)
    return Event(**fields)


@pytest.fixture
def make_event() -> Callable[..., Event]:
    return _make_event
