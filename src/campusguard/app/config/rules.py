"""Rule sections of a camera: derived from the rule registry.

Each rule kind declares its section model next to its rule (`IntrusionRuleConfig` in
`campusguard.app.rules.zone_rules`, with `IntrusionRule`); what every rule section has
(`RuleConfigBase`, `ZoneRuleConfigBase`, ``escalate``) is `campusguard.app.rules.spec`. The
registry (`campusguard.app.rules.registry.RULES`) collects them: `RULE_CONFIGS`, `RULE_KINDS` and
the `RuleConfig` union of a camera's ``rules`` items are derived from it here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from campusguard.app.rules.registry import RULES
from campusguard.app.rules.spec import (
    ClassRef,
    EscalateConfig,
    RuleConfigBase,
    ZoneRuleConfigBase,
    class_ids,
    kind_of,
    rule_config_union,
)

__all__ = [
    "RULE_CONFIGS",
    "RULE_KINDS",
    "ClassRef",
    "EscalateConfig",
    "RuleConfig",
    "RuleConfigBase",
    "ZoneRuleConfigBase",
    "class_ids",
    "kind_of",
    "rule_config_union",
]

RULE_CONFIGS: tuple[type[RuleConfigBase], ...] = RULES.config_models()
"""The model of each rule kind, in the order the kinds are listed (schema, messages, console)."""

RULE_KINDS: tuple[str, ...] = tuple(kind_of(model) for model in RULE_CONFIGS)
"""Every kind a camera's ``rules`` item may have, as ``kind`` spells it in the config, in registry order."""

if TYPE_CHECKING:
    RuleConfig = RuleConfigBase
else:
    RuleConfig = RULES.config_union()
"""One rule section: the model its ``kind`` names (statically, a `RuleConfigBase`)."""
