"""The whole configuration: the root model, loading and validation, and the start-up checks.

A new section is a new module with its model, and one field on `WatchConfig` here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, ValidationError

from campusguard.app.config.alerts import AlertSinkConfig, AnyAlertSinkConfig
from campusguard.app.config.base import ConfigModel, Loc
from campusguard.app.config.cameras import CameraConfig
from campusguard.app.config.cluster import ClusterConfig
from campusguard.app.config.detector import DetectorConfig
from campusguard.app.config.locate import dotted, first_error, line_of
from campusguard.app.config.outputs import OutputsConfig
from campusguard.app.config.retention import RetentionConfig
from campusguard.app.config.storage import StorageConfig
from campusguard.app.config.tracker import TrackerConfig
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
    return [AlertSinkConfig()]


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
"""The safe YAML loader, libyaml's (C) where PyYAML has it: the same documents, about 10 times
faster (a config with 95 shapes of 256 points parses in a fraction of a second, not 15 s)."""


class _ConfigDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """The safe dumper (libyaml's where installed), writing a point or colour (a list of at most
    four numbers) on one line, ``[x, y]``, instead of one line per number."""


_FLOAT_TAG = "tag:yaml.org,2002:float"
_INT_TAG = "tag:yaml.org,2002:int"


def _number_node(dumper: yaml.SafeDumper, value: int | float) -> yaml.Node:
    """A number's node, built directly for the common finite ones (the representer's own path costs
    several calls per number, and a config with 95 polygons of 256 points has 48,640 of them)."""
    if isinstance(value, int):
        return yaml.ScalarNode(_INT_TAG, str(value))
    text = repr(value)
    if "e" in text or "n" in text:  # exponents, inf, nan: PyYAML's own spelling (1.0e-05, .inf, .nan)
        return dumper.represent_float(value)
    return yaml.ScalarNode(_FLOAT_TAG, text)


def _represent_list(dumper: yaml.SafeDumper, value: list[object]) -> yaml.Node:
    if len(value) <= 4 and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value):
        return yaml.SequenceNode("tag:yaml.org,2002:seq", [_number_node(dumper, v) for v in value], flow_style=True)  # type: ignore[arg-type]
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value)


_ConfigDumper.add_representer(list, _represent_list)


def dump_config_yaml(data: dict[str, object]) -> str:
    """A config mapping as YAML text (keys in their order; points as ``[x, y]``), for `parse_config`."""
    return str(yaml.dump(data, Dumper=_ConfigDumper, sort_keys=False))


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
