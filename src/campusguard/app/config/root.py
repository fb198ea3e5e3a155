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

from campusguard.app.alerts.stdout import StdoutSinkConfig
from campusguard.app.config.alerts import AnyAlertSinkConfig
from campusguard.app.config.base import ConfigModel, Loc
from campusguard.app.config.cameras import CameraConfig
from campusguard.app.config.cluster import ClusterConfig
from campusguard.app.config.console import ConsoleConfig
from campusguard.app.config.detector import DetectorConfig
from campusguard.app.config.locate import dotted, first_error, line_of
from campusguard.app.config.outputs import OutputsConfig
from campusguard.app.config.retention import RetentionConfig
from campusguard.app.config.service import ServiceConfig
from campusguard.app.config.storage import StorageConfig
from campusguard.app.config.tracker import TrackerConfig
from campusguard.errors import ConfigError

__all__ = ["LoadedConfig", "WatchConfig", "config_schema", "load_config", "parse_config"]


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
    service: ServiceConfig = Field(
        default_factory=ServiceConfig,
        title="Service",
        description="How the process stops (SIGTERM, SIGINT): the time a clean stop may take.",
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
        names: dict[str, int] = {}
        for si, sink in enumerate(self.alerts):
            if sink.sink_name in names:
                used = f"alerts[{names[sink.sink_name]}]"
                errors.append(
                    (("alerts", si, "name"), f"alert sink name {sink.sink_name!r} is already used by {used}; give one a `name`")
                )
            names.setdefault(sink.sink_name, si)
        for ci, cam in enumerate(self.cameras):
            for ri, rule in enumerate(cam.rules):
                if rule.escalate is None:
                    continue
                for ti, target in enumerate(rule.escalate.to):
                    if target not in names:
                        known = ", ".join(names) or "none"
                        errors.append(
                            (
                                ("cameras", ci, "rules", ri, "escalate", "to", ti),
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

    def where(self, loc: Loc) -> str:
        """``file:line: dotted.path`` for a field location such as ``("cameras", 0, "source")``."""
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


def parse_config(text: str, path: str = "<config>") -> LoadedConfig:
    """Parse and validate config YAML ``text``; raise a one-line `ConfigError` naming file, line and field."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else path
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        sections = ", ".join(WatchConfig.model_fields)
        raise ConfigError(f"{path}:1: the config must be a mapping of sections ({sections}), got {type(data).__name__}")
    loaded = LoadedConfig(WatchConfig(), path, root)
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
