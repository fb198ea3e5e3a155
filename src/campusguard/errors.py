"""Typed exceptions. Every error a user can cause is a subclass of `CampusGuardError`.

The CLI turns any `CampusGuardError` into one line on stderr and a non-zero exit code,
so messages must be complete sentences that name the offending input.
"""

from __future__ import annotations

from typing import Any


class CampusGuardError(Exception):
    """Base class of every error CampusGuard raises on purpose."""

    exit_code: int = 2


class InvalidInputError(CampusGuardError, ValueError):
    """An argument, image, file or data set is not acceptable."""


class ImageReadError(InvalidInputError):
    """An image file is missing, empty, truncated or not an image."""


class ModelLoadError(CampusGuardError):
    """A model file cannot be loaded or is not a YOLO detector."""


class WeightsUnavailableError(ModelLoadError):
    """Named weights cannot be had: not cached and not downloadable (offline, no network), or the
    download is refused (wrong SHA-256, truncated or corrupt file). The message names the URL tried
    and the ``campusguard models pull`` command that fixes it."""


class DeviceError(CampusGuardError):
    """A requested device does not exist or cannot be used."""


class MissingDependencyError(CampusGuardError, ImportError):
    """An optional dependency is not installed; the message names the extra."""


class ConfigError(CampusGuardError):
    """An application configuration file is invalid."""


class SourceError(CampusGuardError):
    """A video source cannot be opened or read."""


def require(module: str, extra: str) -> Any:
    """Import an optional dependency or raise a one-line error naming the pip extra.

    Args:
        module: importable module name, e.g. ``"torch"``.
        extra: the campusguard extra that provides it, e.g. ``"torch"``.
    """
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError(
            f"{module} is not installed; install it with: pip install 'campusguard[{extra}]'"
        ) from exc
