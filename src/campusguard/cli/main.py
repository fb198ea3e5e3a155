"""Entry point of the `campusguard` command.

Each feature registers its commands from its own module (``cli/<feature>.py`` exposing
``register(app)``), so features can be added without touching each other. Every
`CampusGuardError` becomes one line on stderr and a non-zero exit code.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import typer

from campusguard.app.infra.secrets import redact_text
from campusguard.cli.logs import setup_logging
from campusguard.errors import CampusGuardError

os.environ.setdefault("YOLO_OFFLINE", "1")  # Ultralytics must never reach the network from here

def _no_type_label_on_flags() -> None:
    """Typer (0.29) labels each on/off flag ``<bool>`` in ``--help``; a flag takes no value, so it
    gets no type column (options with values keep theirs)."""
    from typer.core import TyperOption

    labelled = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag else labelled(self, ctx)

    setattr(TyperOption, "display_type_rich", display_type_rich)  # noqa: B010


_no_type_label_on_flags()

app = typer.Typer(
    name="campusguard",
    help="YOLOv8 detection on any accelerator, benchmarks, training and the CampusGuard camera app.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress and warnings in detail."),
) -> None:
    """YOLOv8 detection on any accelerator, benchmarks, training and the CampusGuard camera app."""
    setup_logging("info" if verbose else "warning")


# feature modules, in the order their commands appear in --help
_FEATURES = [
    "doctor",
    "predict",
    "export",
    "bench",
    "data",
    "train",
    "watch",
    "scan",
    "events",
    "prune",
    "replay",
    "serve",
    "evidence",
    "report",
    "plan",
    "models",
]
for _name in _FEATURES:
    try:
        _mod = importlib.import_module(f"campusguard.cli.{_name}")
    except ModuleNotFoundError as exc:  # feature not built yet
        if exc.name != f"campusguard.cli.{_name}":
            raise
        continue
    _mod.register(app)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the process exit code."""
    try:
        rv = app(args=argv, standalone_mode=False)
        if isinstance(rv, int):
            return rv
    except CampusGuardError as exc:
        print(f"error: {redact_text(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:  # typer/click exit paths
        return int(exc.code or 0) if isinstance(exc.code, int) else 1
    except Exception as exc:
        # typer vendors its own click: recognise its usage errors by shape, not by class
        if hasattr(exc, "show") and hasattr(exc, "exit_code"):
            exc.show()
            return int(exc.exit_code)
        if type(exc).__name__ == "Abort":
            return 1
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
