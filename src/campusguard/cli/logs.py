"""The one logging set-up of the CLI, shared by the root ``--verbose`` flag and every ``--log-level``.

`log_level_option` is the ``--log-level`` option of every long-running command (``watch``, ``demo``,
``serve``, ``scan``) and `apply_log_level` what each does with it.

`logging.basicConfig` does nothing once the root logger has a handler, so calling it from the
root callback and again from a command silently keeps the first level. `setup_logging` instead
installs its stderr handler once and sets the root level every time: the last call wins.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import typer

from campusguard.app.infra.secrets import install_log_redaction
from campusguard.errors import InvalidInputError

__all__ = ["LOG_LEVELS", "LOG_LEVEL_HELP", "apply_log_level", "log_level_option", "quiet_decoder_logs", "setup_logging"]

LOG_LEVELS: dict[str, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
LOG_LEVEL_HELP = f"{', '.join(LOG_LEVELS)}; default: warning, or info with the root --verbose."
_PACKAGE = "campusguard"
_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _CliHandler(logging.StreamHandler):
    """The CLI's stderr handler; its own class so a second set-up finds it instead of adding another."""


def setup_logging(level: str) -> None:
    """Log to stderr at ``level`` (one of `LOG_LEVELS`, any case) from now on.

    Raises:
        InvalidInputError: ``level`` is not a known level name.
    """
    number = LOG_LEVELS.get(level.lower())
    if number is None:
        raise InvalidInputError(f"--log-level must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
    root = logging.getLogger()
    if not any(isinstance(h, _CliHandler) for h in root.handlers):
        handler = _CliHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(_FORMAT))
        root.addHandler(handler)
    # secrets (camera and webhook credentials, tokens) never reach the log, whoever formats the line
    install_log_redaction(root.handlers)
    # DEBUG is CampusGuard's own: what each source opened, gate decisions, detector batches, rule
    # state changes (rate-limited where per frame); libraries (Ray, paho, urllib3, asyncio) stay at INFO
    root.setLevel(max(number, logging.INFO))
    logging.getLogger(_PACKAGE).setLevel(number if number < logging.INFO else logging.NOTSET)


def log_level_option() -> Any:
    """The ``--log-level`` option (a fresh `typer.Option` per command); ``None`` when not given."""
    return typer.Option(None, "--log-level", help=LOG_LEVEL_HELP)


def apply_log_level(level: str | None) -> None:
    """Set the level a command's ``--log-level`` names; without one, the root callback's (``--verbose``) stands."""
    if level is not None:
        setup_logging(level)


def quiet_decoder_logs() -> None:
    """Keep OpenCV's and FFmpeg's own lines off stderr (each failed attempt to open a camera would
    print two), unless ``--log-level debug``: the app reports a source's outage itself, once when it
    starts and once when it ends. Set before the first capture opens; child processes inherit it."""
    if logging.getLogger(_PACKAGE).getEffectiveLevel() <= logging.DEBUG:
        return
    import os

    os.environ.setdefault("OPENCV_LOG_LEVEL", "ERROR")
    os.environ.setdefault("OPENCV_FFMPEG_LOGLEVEL", "-8")
    from cv2.utils import logging as cv_logging

    cv_logging.setLogLevel(cv_logging.LOG_LEVEL_ERROR)


def repair_option() -> Any:
    """``--repair`` of ``watch`` and ``serve`` (`campusguard.app.engine.wiring.check_storage_files`)."""
    return typer.Option(
        False,
        "--repair",
        help="Set an empty or damaged event database, delivery ledger or MQTT outbox aside "
        "(renamed *.damaged-<time>) and begin a new one; without it such a file stops the start (exit 2).",
    )
