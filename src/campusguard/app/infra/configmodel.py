"""`ConfigModel`: the base of every config section, here so that the modules that declare a section
next to what it configures (a sink in `campusguard.app.alerts`) do not import the config package
(which collects them: `campusguard.app.config` re-exports it from `campusguard.app.config.base`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ConfigModel"]


class ConfigModel(BaseModel):
    """Base of every section: unknown keys are errors and defaults are validated too."""

    model_config = ConfigDict(extra="forbid", validate_default=True)
