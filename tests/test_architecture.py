"""The layering rule: the vision kit never imports the app or the CLI."""

from __future__ import annotations

import ast
from pathlib import Path

import campusguard

PACKAGE = Path(campusguard.__file__).parent
APP_LAYERS = ("campusguard.app", "campusguard.cli")


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_kit_does_not_import_the_app():
    kit_files = [p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in ("app", "cli")]
    assert len(kit_files) > 30
    offenders = {
        str(p.relative_to(PACKAGE)): sorted(m for m in imported_modules(p) if m.startswith(APP_LAYERS))
        for p in kit_files
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_core_import_does_not_pull_torch():
    import subprocess
    import sys

    code = "import sys, campusguard.detector, campusguard.cli.main; print('torch' in sys.modules, 'ultralytics' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False False"


def test_the_config_package_is_schema_only():
    """`app/config/` (one module per section) imports no worker, store or sink: validation stays pure."""
    files = sorted((PACKAGE / "app" / "config").glob("*.py"))
    assert {"__init__.py", "root.py", "locate.py", "cameras.py", "zones.py", "rules.py"} <= {p.name for p in files}
    allowed = ("campusguard.app.config", "campusguard.app.events.types")
    offenders = {
        p.name: sorted(m for m in imported_modules(p) if m.startswith(APP_LAYERS) and not m.startswith(allowed))
        for p in files
    }
    assert {k: v for k, v in offenders.items() if v} == {}
