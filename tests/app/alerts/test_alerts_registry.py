"""The sink registry (issues 34, 41): every list of sink kinds, the config union, the wiring and the files
retention looks after come from `SINKS`, which finds each sink's entry in its own module; a kind added
to it is configured, built and its files found with nothing else edited. These tests iterate over what
the registry found (each kind's minimal section is its entry's ``example``); a kind's own facts are
pinned in its own test."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Literal

import pytest
from pydantic import Field, TypeAdapter, ValidationError

from campusguard.app.alerts.registry import SINKS, SinkRegistry, UnknownSinkKindError
from campusguard.app.alerts.spec import SinkConfigBase, SinkContext, SinkEntry, SinkFiles
from campusguard.app.alerts.stdout import StdoutSink
from campusguard.app.config import ALERT_SINK_KINDS
from campusguard.app.config import parse_config as parse_text
from campusguard.app.engine import wiring
from campusguard.app.retention import policy
from campusguard.app.retention.policy import MediaLayout
from campusguard.errors import ConfigError


def parse_config(data: dict, path: str):
    return parse_text(json.dumps(data), path)  # JSON is YAML


def test_the_config_kinds_are_the_registry_kinds():
    assert SINKS.kinds() == ALERT_SINK_KINDS
    keys = [(e.order is None, e.order or 0, e.config.__module__) for e in SINKS]
    assert keys == sorted(keys)  # by their order, then by module: the same list in every process


@pytest.mark.parametrize("kind", SINKS.kinds())
def test_every_kind_parses_with_its_example_and_a_name(kind):
    block = {**SINKS.entry(kind).example_section(), "name": f"my-{kind}"}
    cfg = parse_config({"cameras": [], "alerts": [block]}, "c.yaml").config.alerts[0]
    assert isinstance(cfg, SINKS.entry(kind).config) and cfg.sink_name == f"my-{kind}"
    assert SINKS.files(cfg, "/data/events.db") == SINKS.entry(kind).files(cfg, Path("/data/events.db"))


def test_retention_finds_each_sinks_files_through_the_registry(tmp_path):
    alerts = [{**entry.example_section(), "name": f"s{i}"} for i, entry in enumerate(SINKS)]
    config = parse_config({"cameras": [], "alerts": alerts, "storage": {"sqlite": str(tmp_path / "events.db")}}, "c")
    files = [SINKS.files(cfg, tmp_path / "events.db") for cfg in config.config.alerts]
    layout = MediaLayout.from_config(config.config)
    assert layout.logs == tuple(dict.fromkeys(f.log for f in files if f.log is not None))  # each file once
    assert layout.dead_letters == tuple(dict.fromkeys(f.dead_letters for f in files if f.dead_letters is not None))
    assert layout.logs or layout.dead_letters  # some sink owns a file, or this test checks nothing


class CounterConfig(SinkConfigBase):
    """A test kind: counts what it is sent, keeps a file of dead letters."""

    kind: Literal["counter"] = Field("counter", title="Kind", description="Counts alerts.")


class Counter:
    def __init__(self) -> None:
        self.sent = 0

    def send(self, event):
        self.sent += 1

    def close(self, timeout_s: float = 5.0) -> None:
        return None


COUNTER = SinkEntry(
    CounterConfig,
    lambda cfg, ctx: Counter(),
    lambda cfg, sqlite: SinkFiles(dead_letters=sqlite.with_suffix(".c.jsonl")),
)


def test_a_kind_added_to_the_registry_is_configured_built_and_its_files_found(monkeypatch, tmp_path):
    registry = SINKS.with_entry(COUNTER)
    union = TypeAdapter(list[registry.config_union()])
    (cfg,) = union.validate_python([{"kind": "counter", "name": "tally"}])
    assert isinstance(cfg, CounterConfig)
    with pytest.raises(ValidationError, match=f"expected {', '.join(registry.kinds())} "):
        union.validate_python([{"kind": "pager"}])
    ctx = SinkContext(sqlite=tmp_path / "events.db", out=io.StringIO())
    assert isinstance(registry.build(cfg, ctx), Counter)
    assert registry.files(cfg, tmp_path / "events.db").dead_letters == tmp_path / "events.c.jsonl"
    # the wiring and retention take whatever the registry has
    monkeypatch.setattr(wiring, "SINKS", registry)
    monkeypatch.setattr(policy, "SINKS", registry)
    loaded = parse_config({"cameras": [], "storage": {"sqlite": str(tmp_path / "events.db")}}, "c.yaml")
    loaded.config.alerts.append(cfg)
    sinks = wiring.open_alert_sinks(loaded, io.StringIO())
    assert [type(s) for s in sinks] == [StdoutSink, Counter]
    assert MediaLayout.from_config(loaded.config).dead_letters == (tmp_path / "events.c.jsonl",)


def test_registry_errors():
    with pytest.raises(ValueError, match="registered twice"):
        SinkRegistry([*SINKS, next(iter(SINKS))])
    with pytest.raises(UnknownSinkKindError, match=f"unknown alert sink kind 'pager'; expected {', '.join(SINKS.kinds())}$"):
        SINKS.entry("pager")


def test_a_missing_password_variable_is_one_line_naming_the_sink(tmp_path, monkeypatch):
    monkeypatch.delenv("CG_TEST_SMTP_PASSWORD", raising=False)
    block = {**SINKS.entry("email").example_section(), "username": "cg", "password_env": "CG_TEST_SMTP_PASSWORD"}
    loaded = parse_config(
        {"cameras": [], "alerts": [block], "storage": {"sqlite": str(tmp_path / "events.db")}}, "c.yaml"
    )
    with pytest.raises(ConfigError, match=r"^c.yaml:1: alerts\[0\]: email sink email: the environment variable "):
        wiring.open_alert_sinks(loaded, io.StringIO())
