"""The rule registry: one `RuleEntry` per rule kind, from which every list of kinds is derived.

`RULES` gives the kinds (`RuleKind` values), their labels and end phases (the console's
filters, `GET /api/v1/rule-kinds`), the rule classes, the builder `wiring` calls, the CLI's ``--kind``
help, and the config's `RuleConfig` union (`campusguard.app.config.rules`: derived from here).

A new rule kind is one module here (and its test): its section model (a `spec.RuleConfigBase`),
the rule class and its `RuleEntry` at module level. `RULES` finds it (`campusguard.plugins.discover`
over this package's modules); no list names it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from campusguard.app.rules.base import Rule
from campusguard.app.rules.spec import RuleConfigBase, RuleContext, RuleEntry, rule_config_union
from campusguard.errors import InvalidInputError
from campusguard.plugins import discover

__all__ = ["RULES", "RuleRegistry", "UnknownRuleKindError"]


class UnknownRuleKindError(InvalidInputError):
    """A rule kind no registry entry has."""


class RuleRegistry:
    """Rule entries by kind, in the order they were given (the order kinds are listed in).

    Raises:
        ValueError: two entries of one kind.
    """

    def __init__(self, entries: Iterable[RuleEntry[Any]]) -> None:
        self._entries: dict[str, RuleEntry[Any]] = {}
        for entry in entries:
            if entry.kind in self._entries:
                raise ValueError(f"rule kind {entry.kind!r} is registered twice")
            self._entries[entry.kind] = entry

    def __iter__(self) -> Iterator[RuleEntry[Any]]:
        return iter(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, kind: object) -> bool:
        return kind in self._entries

    def with_entry(self, entry: RuleEntry[Any]) -> RuleRegistry:
        """A new registry with ``entry`` added last (this one is left as it is)."""
        return RuleRegistry([*self, entry])

    def kinds(self) -> tuple[str, ...]:
        """Every kind, in order."""
        return tuple(self._entries)

    def kinds_text(self) -> str:
        """``"intrusion, crowd, ... or fall"``: the kinds for a message or a help text."""
        kinds = self.kinds()
        return kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + " or " + kinds[-1]

    def entry(self, kind: str) -> RuleEntry[Any]:
        """The entry of ``kind``.

        Raises:
            UnknownRuleKindError: no entry has that kind; the message lists the known ones.
        """
        try:
            return self._entries[kind]
        except KeyError:
            raise UnknownRuleKindError(f"unknown rule kind {kind!r}; expected {self.kinds_text()}") from None

    def check_kind(self, kind: str) -> str:
        """``kind`` itself when the registry has it.

        Raises:
            UnknownRuleKindError: it does not.
        """
        return self.entry(kind).kind

    def label(self, kind: str) -> str:
        """The label of ``kind`` (``"Fire lane"``); raises `UnknownRuleKindError` for an unknown one."""
        return self.entry(kind).label

    def rule_types(self) -> dict[str, type]:
        """``{kind: rule class}``."""
        return {kind: entry.rule_type for kind, entry in self._entries.items()}

    def config_models(self) -> tuple[type[RuleConfigBase], ...]:
        """The section models of the kinds written as a camera's ``rules`` items, in order (not the
        kinds a camera section of their own configures, such as ``health``)."""
        return tuple(entry.config for entry in self if entry.section is None)

    def config_union(self) -> Any:
        """The discriminated union (on ``kind``) of `config_models`: a camera's ``rules`` items."""
        return rule_config_union(self.config_models())

    def build(self, cfg: RuleConfigBase, ctx: RuleContext) -> Rule:
        """The rule the section ``cfg`` configures, for the camera ``ctx`` describes.

        Raises:
            UnknownRuleKindError: ``cfg`` is of a kind the registry does not have.
            InvalidInputError: the rule rejects a value (the caller names the config line).
        """
        entry = self.entry(cfg.kind)
        if not isinstance(cfg, entry.config):
            raise UnknownRuleKindError(
                f"a {cfg.kind!r} rule section must be a {entry.config.__name__}, got {type(cfg).__name__}"
            )
        return entry.build(cfg, ctx)


RULES = RuleRegistry(found.entry for found in discover(__name__.rpartition(".")[0], RuleEntry, exclude=("registry",)))
"""Every rule kind of the app: each `RuleEntry` declared in a module of `campusguard.app.rules`."""

