"""The whole configuration: the root model, loading and validation, and the start-up checks.

A new section is a new module with its model, and one field on `WatchConfig` here.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from campusguard.app.alerts.stdout import StdoutSinkConfig
from campusguard.app.config.alerts import AnyAlertSinkConfig
from campusguard.app.config.base import ConfigModel, Loc
from campusguard.app.config.cameras import CameraConfig
from campusguard.app.config.cluster import ClusterConfig
from campusguard.app.config.console import ConsoleConfig
from campusguard.app.config.detector import DetectorConfig
from campusguard.app.config.locate import dotted, first_error, line_of
from campusguard.app.config.nodes import NodesConfig
from campusguard.app.config.outputs import OutputsConfig
from campusguard.app.config.retention import RetentionConfig
from campusguard.app.config.rules import RuleConfigBase
from campusguard.app.config.service import ServiceConfig
from campusguard.app.config.storage import StorageConfig
from campusguard.app.config.tracker import TrackerConfig
from campusguard.app.infra.secrets import remember_config_secrets
from campusguard.app.rules.camera_health import CameraHealthConfig
from campusguard.errors import ConfigError

__all__ = [
    "YAML_LOADER",
    "LoadedConfig",
    "WatchConfig",
    "config_schema",
    "dump_config_yaml",
    "load_config",
    "parse_config",
    "validate_config",
]


def _one_stdout_sink() -> list[AnyAlertSinkConfig]:
    return [StdoutSinkConfig()]


class WatchConfig(ConfigModel):
    """The whole `campusguard watch` configuration."""

    version: Literal[1] = Field(1, title="Version", description="Configuration format version.")
    detector: DetectorConfig = Field(
        default_factory=DetectorConfig, title="Detector", description="Detection shared by all cameras."
    )
    tracker: TrackerConfig = Field(
        default_factory=TrackerConfig, title="Tracker", description="Tracking settings (one tracker per camera)."
    )
    cameras: list[CameraConfig] = Field(
        default_factory=list, title="Cameras", description="The cameras to watch.", max_length=256
    )
    alerts: list[AnyAlertSinkConfig] = Field(
        default_factory=_one_stdout_sink,
        title="Alert sinks",
        description="Where events go after they are stored.",
        max_length=32,
    )
    storage: StorageConfig = Field(default_factory=StorageConfig, title="Storage", description="The event store.")
    outputs: OutputsConfig = Field(
        default_factory=OutputsConfig, title="Outputs", description="Annotated video, snapshots, metrics."
    )
    cluster: ClusterConfig = Field(
        default_factory=ClusterConfig, title="Cluster", description="Camera groups on Ray actors (with --ray)."
    )
    retention: RetentionConfig = Field(
        default_factory=RetentionConfig,
        title="Retention",
        description="How long incidents, media and logs are kept, and how much disk media may use.",
    )
    console: ConsoleConfig = Field(
        default_factory=ConsoleConfig,
        title="Console",
        description="The operators' console (campusguard serve): its public address and campus sign-in (OIDC).",
    )
    nodes: NodesConfig = Field(
        default_factory=NodesConfig,
        title="Nodes",
        description="Several `serve --node` processes sharing the PostgreSQL store: their heartbeat, leases and takeover.",
    )
    service: ServiceConfig = Field(
        default_factory=ServiceConfig,
        title="Service",
        description="How the process stops (SIGTERM, SIGINT): the time a clean stop may take.",
    )
    health: CameraHealthConfig = Field(
        default_factory=CameraHealthConfig,
        title="Camera health",
        description="Site-wide camera-health settings (offline, frozen, covered, blurred, moved), on for every "
        "camera; a camera's own `health` section changes the fields it names.",
    )

    @model_validator(mode="after")
    def _resolve_health(self) -> WatchConfig:
        for cam in self.cameras:
            cam.resolve_health(self.health)
        return self

    def reference_errors(self) -> list[tuple[Loc, str]]:
        """Cross-references the field validators cannot see: unique camera ids, then each camera's own."""
        errors: list[tuple[Loc, str]] = []
        seen: dict[str, int] = {}
        for ci, cam in enumerate(self.cameras):
            if cam.id in seen:
                errors.append(
                    (("cameras", ci, "id"), f"camera id {cam.id!r} is already used by cameras[{seen[cam.id]}]")
                )
            seen.setdefault(cam.id, ci)
            errors.extend((("cameras", ci, *loc), msg) for loc, msg in cam.reference_errors())
        names: dict[str, int] = {}
        for si, sink in enumerate(self.alerts):
            if sink.sink_name in names:
                used = f"alerts[{names[sink.sink_name]}]"
                errors.append(
                    (("alerts", si, "name"), f"alert sink name {sink.sink_name!r} is already used by {used}; give one a `name`")
                )
            names.setdefault(sink.sink_name, si)
        escalating: list[tuple[Loc, RuleConfigBase]] = [(("health",), self.health)]
        for ci, cam in enumerate(self.cameras):
            escalating += [(("cameras", ci, "rules", ri), rule) for ri, rule in enumerate(cam.rules)]
            if cam.health is not None:
                escalating.append((("cameras", ci, "health"), cam.health))
        for loc, rule in escalating:
            if rule.escalate is None:
                continue
            for ti, target in enumerate(rule.escalate.to):
                if target not in names:
                    known = ", ".join(names) or "none"
                    errors.append(
                        (
                            (*loc, "escalate", "to", ti),
                            f"no alert sink is named {target!r} (alert sinks: {known})",
                        )
                    )
        return errors


@dataclass
class LoadedConfig:
    """A validated config plus where each field came from, so later checks can name the line."""

    config: WatchConfig
    path: str = "<config>"
    root: yaml.Node | None = field(default=None, repr=False)
    text: str | None = field(default=None, repr=False)
    """The YAML text: its node tree (``root``, the lines of the fields) is composed from it when an
    error first needs a line."""

    def where(self, loc: Loc) -> str:
        """``file:line: dotted.path`` for a field location such as ``("cameras", 0, "source")``."""
        if self.root is None and self.text is not None:
            self.root = yaml.compose(self.text, Loader=YAML_LOADER)
        line = line_of(self.root, loc)
        prefix = f"{self.path}:{line}" if line else self.path
        return f"{prefix}: {dotted(loc)}" if loc else prefix

    def error(self, loc: Loc, message: str) -> ConfigError:
        """A one-line `ConfigError` naming file, line and field."""
        return ConfigError(f"{self.where(loc)}: {message}")

    def check_frame_size(self, camera_index: int, resolution_wh: tuple[int, int]) -> None:
        """Raise `ConfigError` if a zone or line of a camera does not fit its real frame."""
        cam = self.config.cameras[camera_index]
        errors = cam.frame_errors(resolution_wh, f"camera {cam.id!r}")
        if errors:
            loc, msg = errors[0]
            raise self.error(("cameras", camera_index, *loc), msg)

    def check_class_names(self, camera_index: int, names: dict[int, str]) -> None:
        """Raise `ConfigError` if a rule of a camera names a class the model does not know."""
        cam = self.config.cameras[camera_index]
        by_name = {v: k for k, v in names.items()}
        for ri, rule in enumerate(cam.rules):
            for k, ref in enumerate(rule.classes):
                known = ref in names if isinstance(ref, int) else ref in by_name
                if not known:
                    shown = ", ".join(names[i] for i in sorted(names)[:12]) + (" ..." if len(names) > 12 else "")
                    raise self.error(
                        ("cameras", camera_index, "rules", ri, "classes", k),
                        f"unknown class {ref!r}; the model knows: {shown}",
                    )


YAML_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BaseDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
"""The safe YAML loader, libyaml's (C) where PyYAML has it: the same documents, about 10 times
faster (a config with 95 shapes of 256 points parses in a fraction of a second, not 15 s)."""


def _float_text(value: float) -> str:
    """A float as PyYAML's safe dumper spells it (``1.0e-05``, ``.inf``, ``.nan``), so it loads as a float."""
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value).lower()
    return text.replace("e", ".0e", 1) if "e" in text and "." not in text else text


def _number_text(value: object) -> str | None:
    """A number's YAML text, or None for anything else (booleans are not numbers here)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _float_text(value)
    return None


_PLAIN_NUMBER = r"-?[0-9]+(?:\.[0-9]+)?"
_PLAIN_ITEM = rf"\[{_PLAIN_NUMBER}(?:, {_PLAIN_NUMBER}){{0,3}}\]"
_PLAIN_POINTS = re.compile(rf"\[{_PLAIN_ITEM}(?:, {_PLAIN_ITEM})*\]")
"""`json.dumps` of a list of items of 1 to 4 numbers, none with an exponent (YAML would read
``1e-05`` as a string), none a NaN, an infinity or a boolean."""


def _point_texts(value: object) -> list[str] | None:
    """``[x, y]`` (or up to 4 numbers: a colour) as YAML flow text per item, if ``value`` is a list of them."""
    if not isinstance(value, list) or not value:
        return None
    # the usual case, in C: `json` writes the numbers as Python's repr, which YAML reads back as
    # they were, and the pattern admits only items of 1 to 4 plain numbers (no exponent, NaN,
    # infinity, boolean or string: those go number by number below)
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = ""
    if _PLAIN_POINTS.fullmatch(text):
        return [f"[{item}]" for item in text[2:-2].split("], [")]
    out = []
    for item in value:
        if not isinstance(item, list | tuple) or not 1 <= len(item) <= 4:
            return None
        numbers = [_number_text(v) for v in item]
        if any(n is None for n in numbers):
            return None
        out.append(f"[{', '.join(numbers)}]")  # type: ignore[arg-type]
    return out


def dump_config_yaml(data: dict[str, object]) -> str:
    """A config mapping as YAML text (keys in their order), for `parse_config`.

    Lists of points (polygons, lines) are written one ``- [x, y]`` per line, by text rather than
    through PyYAML's representer (which builds several objects per number: a config with 95
    polygons of 256 points took most of a second): each such list is dumped as a placeholder,
    then replaced by its lines.
    """
    token = f"cg-points-{uuid.uuid4().hex}-"
    blocks: list[list[str]] = []

    class Dumper(_BaseDumper):  # type: ignore[misc, valid-type]
        pass

    def represent_list(dumper: yaml.SafeDumper, value: list[object]) -> yaml.Node:
        points = _point_texts(value)
        if points is not None:
            blocks.append(points)
            return dumper.represent_str(f"{token}{len(blocks) - 1}")
        short = [_number_text(v) for v in value] if len(value) <= 4 else None
        if short and all(t is not None for t in short):  # a point or a colour: [x, y] on one line
            return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=True)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", value)

    Dumper.add_representer(list, represent_list)
    text = str(yaml.dump(data, Dumper=Dumper, sort_keys=False, width=1 << 16))
    if not blocks:
        return text
    out = []
    for line in text.splitlines(keepends=True):
        at = line.find(token)
        if at < 0:
            out.append(line)
            continue
        points = blocks[int(line[at + len(token) :].strip())]
        head = line[:at]
        if head.rstrip().endswith(":"):  # `key: <list>`: the items below, as PyYAML indents them
            indent = " " * len(re.match(r"[ ]*(?:- )*", head).group(0))  # type: ignore[union-attr]  # the key's column
            out.append(head.rstrip() + "\n" + "".join(f"{indent}- {p}\n" for p in points))
        else:  # anywhere else: one flow sequence in place
            out.append(f"{head}[{', '.join(points)}]\n")
    return "".join(out)


def parse_config(text: str, path: str = "<config>") -> LoadedConfig:
    """Parse and validate config YAML ``text``; raise a one-line `ConfigError` naming file, line and field."""
    try:
        data = yaml.load(text, Loader=YAML_LOADER)  # noqa: S506 - the safe loader (libyaml's when installed)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None
    return validate_config(data, path, text)


def validate_config(data: object, path: str = "<config>", text: str | None = None) -> LoadedConfig:
    """Validate a config mapping (as `parse_config` reads it from YAML); raise a one-line `ConfigError`
    naming the field, and with ``text`` (the YAML it came from) the file's line."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        sections = ", ".join(WatchConfig.model_fields)
        raise ConfigError(f"{path}:1: the config must be a mapping of sections ({sections}), got {type(data).__name__}")
    remember_config_secrets(data)  # kept out of every log line from now on, even if the config is refused
    loaded = LoadedConfig(WatchConfig(), path, None, text)
    try:
        loaded.config = WatchConfig.model_validate(data)
    except ValidationError as exc:
        loc, msg = first_error(exc, data)
        raise loaded.error(loc, msg) from None
    errors = loaded.config.reference_errors()
    if errors:
        loc, msg = errors[0]
        raise loaded.error(loc, msg + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
    return loaded


def load_config(path: str | Path) -> LoadedConfig:
    """Read and validate a config file; relative paths inside it stay relative to the working directory."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{p}: config file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read config file: {exc.__class__.__name__}") from None
    return parse_config(text, str(p))


def config_schema() -> str:
    """The JSON Schema of `WatchConfig`, as indented JSON text."""
    return json.dumps(WatchConfig.model_json_schema(), indent=2)
