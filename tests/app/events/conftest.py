"""Test helpers for events: a `make_event` factory."""

from __future__ import annotations
