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


def test_watch_and_the_cli_do_not_pull_the_console_extra():
    """The console's server, clips and metrics libraries are an optional extra: `watch` runs without them
    (and without psycopg, the ``postgres`` extra, unless the config names a PostgreSQL store)."""
    import subprocess
    import sys

    optional = ["fastapi", "uvicorn", "starlette", "av", "prometheus_client", "argon2", "paho", "psycopg"]
    code = (
        "import sys, campusguard.app.service, campusguard.app.pipeline, campusguard.cli.main; "
        f"print([m for m in {optional!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_the_config_package_is_schema_only():
    """`app/config/` (one module per section) imports no worker, store or sink: validation stays pure."""
    files = sorted((PACKAGE / "app" / "config").glob("*.py"))
    assert {"__init__.py", "root.py", "locate.py", "cameras.py", "zones.py", "rules.py"} <= {p.name for p in files}
    allowed = ("campusguard.app.config", "campusguard.app.events.types", "campusguard.app.events.urls")
    offenders = {
        p.name: sorted(m for m in imported_modules(p) if m.startswith(APP_LAYERS) and not m.startswith(allowed))
        for p in files
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def _defined_at_module_level(name: str) -> list[str]:
    """Modules of the package that define ``name`` (a function, class or assigned constant) at top level."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            targets = (
                [t.id for t in node.targets if isinstance(t, ast.Name)]
                if isinstance(node, ast.Assign)
                else [node.name]
                if isinstance(node, (ast.FunctionDef, ast.ClassDef))
                else []
            )
            if name in targets:
                found.append(str(path.relative_to(PACKAGE)))
    return found


def test_shared_facts_are_defined_once():
    assert _defined_at_module_level("IMAGE_SUFFIXES") == ["io/images.py"]
    assert _defined_at_module_level("to_bgr_uint8") == ["ops/preprocess.py"]
    assert _defined_at_module_level("check_imgsz") == ["models/info.py"]
    assert _defined_at_module_level("ModelInfo") == ["models/info.py"]


def test_models_export_does_not_import_the_registry():
    # the registry imports the exporter; the exporter needs only the resolved reference
    assert "campusguard.models.registry" not in imported_modules(PACKAGE / "models" / "export.py")


def test_scan_reuses_the_watch_pipeline_and_stays_out_of_the_cli():
    """`app/scan/` runs recordings through `WatchService` (no second pipeline) and imports no CLI or console."""
    files = sorted((PACKAGE / "app" / "scan").glob("*.py"))
    imports = {p.name: imported_modules(p) for p in files}
    assert "campusguard.app.service" in imports["unit.py"]
    forbidden = ("campusguard.cli", "campusguard.app.console", "campusguard.app.pipeline.DetectionWorker")
    assert {
        n: sorted(m for m in i if m.startswith(forbidden))
        for n, i in imports.items()
        if any(m.startswith(forbidden) for m in i)
    } == {}


def test_watch_without_ray_imports_nothing_of_ray():
    """Ray is the `ray` extra: imported lazily by the app (`app/cluster/ray_executor.py`) when `--ray` is given
    (also by the console's runtime)."""
    import subprocess
    import sys

    code = (
        "import sys, campusguard.cli.main, campusguard.cli.watch, campusguard.app.service, "
        "campusguard.app.cluster.driver, campusguard.app.cluster.group, campusguard.app.cluster.ray_executor, "
        "campusguard.app.console.runtime, campusguard.app.console.cluster_media; "
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
    importers = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if any(m == "ray" or m.startswith("ray.") for m in imported_modules(p))
    ]
    assert not [p for p in importers if not p.startswith(("app/", "cli/"))], importers  # never the vision kit
