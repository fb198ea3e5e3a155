"""The `watch` configuration: one YAML file validated by pydantic v2 models, one module per section.

Every model forbids unknown keys and every field has a default, bounds, a title and a
description, so `campusguard config schema` documents itself. Validators do no I/O;
checks that need the outside world (a source that opens, a class name the model knows,
the real frame size) run at start-up through `LoadedConfig.check_frame_size` and
`LoadedConfig.check_class_names` and still name the line in the file.

Errors become one-line `ConfigError` messages: ``config.yaml:14: cameras[0].zones[1].polygon:
polygon is self-intersecting: edges 0 and 2 cross each other``.

Modules:
    `base`: `ConfigModel` (the base of every section), `Loc`.
    `cameras`: `CameraConfig`, `ReconnectConfig`, `source_kind`.
    `zones`: `ZoneConfig`, `LineConfig`, checked by `campusguard.zones` and built into its
        `PolygonZone` and `LineZone`.
    `rules`: `RULE_CONFIGS`, `RULE_KINDS` and the `RuleConfig` union, derived from the rule
        registry (each rule's section model lives in its rule module), `class_ids`.
    `motion`: `MotionConfig`, a camera's motion gating.
    `detector`, `tracker`, `storage`, `outputs`: the shared sections.
    `alerts`: the ``alerts`` union, derived from the sink registry (`campusguard.app.alerts.registry`).
    `cluster`: `ClusterConfig`, camera groups on Ray actors (`watch --ray`).
    `retention`: `RetentionConfig` (global) and `CameraRetentionConfig` (a camera's override).
    `service`: `ServiceConfig`, how the process stops.
    `root`: `WatchConfig` (the file), `LoadedConfig`, `parse_config`, `load_config`, `config_schema`.
    `locate`: the line of a field in the YAML, and pydantic errors as one message.

A new section is a new module with its model, and one field on `WatchConfig`.
"""

from campusguard.app.config.alerts import ALERT_SINK_KINDS, AnyAlertSinkConfig, SinkConfigBase
from campusguard.app.config.base import ConfigModel, Loc
from campusguard.app.config.cameras import CameraConfig, ReconnectConfig, source_kind
from campusguard.app.config.cluster import ClusterConfig
from campusguard.app.config.detector import DetectorConfig
from campusguard.app.config.motion import MotionConfig
from campusguard.app.config.outputs import OutputsConfig
from campusguard.app.config.retention import CameraRetentionConfig, RetentionConfig
from campusguard.app.config.root import (
    YAML_LOADER,
    LoadedConfig,
    WatchConfig,
    config_schema,
    dump_config_yaml,
    load_config,
    parse_config,
    validate_config,
)
from campusguard.app.config.rules import (
    RULE_CONFIGS,
    RULE_KINDS,
    RuleConfig,
    RuleConfigBase,
    ZoneRuleConfigBase,
    class_ids,
    kind_of,
    rule_config_union,
)
from campusguard.app.config.service import ServiceConfig
from campusguard.app.config.storage import StorageConfig
from campusguard.app.config.tracker import TrackerConfig
from campusguard.app.config.zones import LineConfig, ZoneConfig
from campusguard.zones import polygon_problem  # the zone check the config validates with

__all__ = [
    "ALERT_SINK_KINDS",
    "RULE_CONFIGS",
    "RULE_KINDS",
    "AnyAlertSinkConfig",
    "SinkConfigBase",
    "CameraConfig",
    "CameraRetentionConfig",
    "ClusterConfig",
    "ConfigModel",
    "DetectorConfig",
    "LineConfig",
    "LoadedConfig",
    "Loc",
    "MotionConfig",
    "OutputsConfig",
    "ReconnectConfig",
    "RetentionConfig",
    "RuleConfig",
    "RuleConfigBase",
    "ServiceConfig",
    "StorageConfig",
    "TrackerConfig",
    "WatchConfig",
    "ZoneConfig",
    "ZoneRuleConfigBase",
    "class_ids",
    "config_schema",
    "kind_of",
    "rule_config_union",
    "load_config",
    "dump_config_yaml",
    "YAML_LOADER",
    "parse_config",
    "validate_config",
    "polygon_problem",
    "source_kind",
]
