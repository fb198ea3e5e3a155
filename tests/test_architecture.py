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
        "import sys, campusguard.app.service, campusguard.app.engine.detection, campusguard.app.engine.analytics, campusguard.cli.main; "
        f"print([m for m in {optional!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_evidence_verification_needs_only_the_standard_library_and_cryptography():
    """`app/evidence/bundle.py` (what `campusguard evidence verify` runs) imports nothing of the app, the
    console, a database driver or the detector: a recipient verifies a bundle with the core install only.
    The evidence package's ``__init__`` imports none of its modules, and nothing in it imports the console."""
    import sys

    bundle = PACKAGE / "app" / "evidence" / "bundle.py"
    stdlib = set(sys.stdlib_module_names)
    outside = sorted(
        m for m in imported_modules(bundle) if m.split(".")[0] not in stdlib and m.split(".")[0] != "cryptography"
    )
    assert outside == ["campusguard.errors"]
    init = PACKAGE / "app" / "evidence" / "__init__.py"
    assert imported_modules(init) <= {"__future__"}
    console = {
        p.name: sorted(m for m in imported_modules(p) if m.startswith(("campusguard.app.console", "campusguard.cli")))
        for p in (PACKAGE / "app" / "evidence").glob("*.py")
    }
    assert {k: v for k, v in console.items() if v} == {}


def test_the_config_package_is_schema_only():
    """`app/config/` (one module per section) imports no worker or store: validation stays pure. The sink
    and rule sections come from their registries, declared in the sinks' and rules' own modules."""
    files = sorted((PACKAGE / "app" / "config").glob("*.py"))
    assert {"__init__.py", "root.py", "locate.py", "cameras.py", "zones.py", "rules.py"} <= {p.name for p in files}
    allowed = (
        "campusguard.app.config",
        "campusguard.app.events.types",
        "campusguard.app.events.urls",
        "campusguard.app.infra.configmodel",
        "campusguard.app.infra.durable",  # the config editor rewrites the file durably (`app/config/editor.py`)
        "campusguard.app.infra.secrets",  # the one owner of secrets: remembers the config's, pure otherwise
        "campusguard.app.alerts.registry",
        "campusguard.app.alerts.spec",
        "campusguard.app.alerts.stdout",  # the default sink
        "campusguard.app.rules.registry",
        "campusguard.app.rules.spec",
        "campusguard.app.rules.camera_health",  # the cameras' `health` section (a kind with a section of its own)
    )
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
    # issue 23: one box colour and label (predict --save and the watch view alike), one rescale, one cache root
    assert _defined_at_module_level("color_for") == ["io/draw.py"]
    assert _defined_at_module_level("box_label") == ["io/draw.py"]
    assert _defined_at_module_level("resize_boxes") == ["ops/boxes.py"]
    assert _defined_at_module_level("cache_dir") == ["cache.py"]
    assert _defined_at_module_level("frame_rates") == ["app/engine/metrics.py"]
    assert _defined_at_module_level("Backoff") == ["app/infra/backoff.py"]


def test_models_export_does_not_import_the_registry():
    # the loader imports the exporter; the exporter needs only the resolved reference
    assert "campusguard.models.registry" not in imported_modules(PACKAGE / "models" / "export.py")
    assert "campusguard.backends.loader" not in imported_modules(PACKAGE / "models" / "export.py")


def test_models_never_import_backends():
    """One direction: ``backends/`` reads ``models/`` (model info, exports), ``models/`` never imports a backend."""
    graph = import_graph()
    offenders = {
        m: sorted(t for t in targets if t.startswith("campusguard.backends"))
        for m, targets in graph.items()
        if m.startswith("campusguard.models")
    }
    assert {m: t for m, t in offenders.items() if t} == {}


def test_scan_reuses_the_watch_pipeline_and_stays_out_of_the_cli():
    """`app/scan/` runs recordings through `WatchService` (no second pipeline) and imports no CLI or console."""
    files = sorted((PACKAGE / "app" / "scan").glob("*.py"))
    imports = {p.name: imported_modules(p) for p in files}
    assert "campusguard.app.service" in imports["unit.py"]
    forbidden = ("campusguard.cli", "campusguard.app.console", "campusguard.app.engine.detection")
    assert {
        n: sorted(m for m in i if m.startswith(forbidden))
        for n, i in imports.items()
        if any(m.startswith(forbidden) for m in i)
    } == {}


def test_nodes_coordinate_through_postgresql_only_and_stay_out_of_the_console():
    """`app/nodes/` (issue 43) runs cameras through `WatchService` and talks to the other nodes only
    through PostgreSQL: it imports no CLI, no console, no Ray, and psycopg only inside functions
    (the `postgres` extra stays optional for a single box)."""
    files = sorted((PACKAGE / "app" / "nodes").glob("*.py"))
    imports = {p.name: imported_modules(p) for p in files}
    assert "campusguard.app.service" in imports["service.py"]
    forbidden = ("campusguard.cli", "campusguard.app.console", "campusguard.app.cluster", "ray")
    assert {n: sorted(m for m in i if m.startswith(forbidden)) for n, i in imports.items()} == {n: [] for n in imports}
    top_level = {
        p.name
        for p in files
        for node in ast.parse(p.read_text()).body
        if isinstance(node, ast.Import | ast.ImportFrom) and "psycopg" in ast.dump(node)
    }
    assert top_level == set()


def test_the_event_store_imports_nothing_of_the_stages_above_it():
    """`app/events/` (the events and their stores) is a floor below the engine and the sinks: it imports
    only itself, `app/infra/` and the errors, `TYPE_CHECKING` and local imports included. The event writer,
    a stage that calls the sinks, lives in `app/engine/writer.py` (issue 41)."""
    graph = import_graph()
    allowed = ("campusguard.app.events", "campusguard.app.infra", "campusguard.errors")
    upward = {
        m: sorted(t for t in targets if not t.startswith(allowed))
        for m, targets in graph.items()
        if m.startswith("campusguard.app.events")
    }
    assert {m: t for m, t in upward.items() if t} == {}


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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_nodes(node: ast.AST):
    """Every import statement under ``node``, at any depth (functions, methods, try blocks, and both branches
    of ``if TYPE_CHECKING:``: a type-only import is still a dependency, and a cycle hidden behind one is a
    cycle in the design)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        else:
            yield from _import_nodes(child)


def _with_packages(name: str) -> list[str]:
    """``a.b.c`` -> ``[a, a.b, a.b.c]``: importing a module runs the ``__init__`` of every package above it."""
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def import_graph() -> dict[str, set[str]]:
    """Module -> the campusguard modules whose code its imports can run (a package is its ``__init__``).

    - ``import a.b.c`` and ``from a.b.c import x`` run ``a``, ``a.b`` and ``a.b.c``; ``from a.b import c``
      runs ``a.b.c`` as well when ``c`` is a submodule; relative imports are resolved first.
    - The packages above the importing module itself are left out of those implicit edges: Python starts a
      package's ``__init__`` before any of its submodules, so they are always in ``sys.modules`` already. A
      package ``__init__`` that re-exports its submodules is therefore no cycle, but a submodule that names
      its own package explicitly (``from . import x``, ``from campusguard.app.events import Event``) does
      get the edge, since it reads names the half-run ``__init__`` may not have bound yet.
    - Imports inside functions count (they run when called, and a local import hiding a cycle is the thing
      this test is for), and so do imports under ``if TYPE_CHECKING:``: they never run, but a module that
      needs another's types to be written depends on it, and a cycle behind one is still a cycle (issue 41).
    """
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        own_packages = set(_with_packages(package))
        for node in _import_nodes(ast.parse(path.read_text())):
            explicit: set[str] = set()
            if isinstance(node, ast.Import):
                explicit.update(a.name for a in node.names)
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                explicit.add(base)
                explicit.update(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in files)
            for target in explicit:
                if not target.startswith("campusguard"):
                    continue
                implied = {p for p in _with_packages(target) if p not in own_packages}
                graph[module].update(t for t in implied | {target} if t in files and t != module)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one module (Tarjan, then a shortest
    path back to the component's first module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    cycles = []
    for component in components:
        members, start = set(component), component[0]
        came_from: dict[str, str] = {}
        frontier = [start]
        while start not in came_from:  # breadth first, so the cycle printed is a shortest one
            next_frontier = []
            for v in frontier:
                for w in sorted(graph[v] & members):
                    if w not in came_from:
                        came_from[w] = v
                        next_frontier.append(w)
            frontier = next_frontier
        path, v = [start], came_from[start]
        while v != start:
            path.append(v)
            v = came_from[v]
        cycles.append([start, *reversed(path[1:]), start])
    return cycles


def test_the_cycle_finder_finds_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert _cycles(graph) == [["a", "b", "c", "a"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_is_complete():
    graph = import_graph()
    assert "campusguard.models.export" in graph["campusguard.backends.loader"]
    assert "campusguard.app" in graph["campusguard.cli.watch"]  # a package's __init__ is a node
    assert "campusguard.app.events" not in graph["campusguard.app.events.store"]  # its own package: implicit
    assert "campusguard.app.events.types" in graph["campusguard.app.events"]  # a re-export is an edge


def test_type_checking_and_local_imports_are_edges():
    """Issue 41: an import only a type checker runs, or one inside a function, is a dependency all the same."""
    code = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from campusguard.a import A\nelse:\n    import campusguard.b\n"
        "def f():\n    import campusguard.c\n"
    )
    found = {
        name
        for node in _import_nodes(ast.parse(code))
        for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module])
    }
    assert found == {"typing", "campusguard.a", "campusguard.b", "campusguard.c"}


_DISCOVERING = {  # registry -> (its package folder, which module names `campusguard.plugins.discover` imports)
    "campusguard.app.rules.registry": (("app", "rules"), lambda name: name != "registry"),
    "campusguard.app.alerts.registry": (("app", "alerts"), lambda name: name != "registry"),
    "campusguard.backends.registry": (("backends",), lambda name: name.endswith("_backend")),
}


def with_discovery(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """``graph`` plus the imports a registry makes by discovery (no import statement names them): each
    registry imports the modules of its folder, so a plugin that imports its registry is a cycle."""
    out = {m: set(t) for m, t in graph.items()}
    for registry, (folder, include) in _DISCOVERING.items():
        package = ".".join(["campusguard", *folder])
        for path in sorted(PACKAGE.joinpath(*folder).glob("*.py")):
            if not path.stem.startswith("_") and include(path.stem):
                out[registry].add(f"{package}.{path.stem}")
    return out


def test_no_import_cycles():
    """No cycle among campusguard modules, counting imports inside functions and under ``TYPE_CHECKING``
    (see `import_graph`), and the registries' imports by discovery."""
    graph = with_discovery(import_graph())
    assert "campusguard.app.rules.line_rules" in graph["campusguard.app.rules.registry"]
    assert "campusguard.backends.openvino_backend" in graph["campusguard.backends.registry"]
    cycles = _cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def _registry_imports(rel: str) -> set[str]:
    return {m for m in imported_modules(PACKAGE / rel) if m.startswith("campusguard")}


def test_a_sink_is_one_module_found_by_discovery():
    """Issue 41: a new alert sink is one module in `app/alerts/` (section model, builder, files it owns,
    example, entry) and its test: `SINKS` finds its `SinkEntry` (`campusguard.plugins.discover`), the
    registry imports no sink module, and the config union, the wiring and retention's files are derived
    from the registry, so no module outside `app/alerts/` names a sink module."""
    from campusguard.app.alerts.registry import SINKS

    modules = set()
    for entry in SINKS:
        module = entry.config.__module__
        assert entry.build.__module__ == module and entry.files.__module__ in (module, "campusguard.app.alerts.spec")
        assert module.startswith("campusguard.app.alerts."), module
        modules.add(module)
    assert len(modules) == len(SINKS)  # one module per sink
    assert _registry_imports("app/alerts/registry.py") == {
        "campusguard.app.alerts.protocol",
        "campusguard.app.alerts.spec",
        "campusguard.errors",
        "campusguard.plugins",
    }
    derived = ["app/config/alerts.py", "app/config/root.py", "app/engine/wiring.py", "app/retention/policy.py"]
    for rel in derived:
        named = imported_modules(PACKAGE / rel) & (modules - {"campusguard.app.alerts.stdout"})
        assert not named, f"{rel} names sink modules {sorted(named)}: derive from SINKS instead"


def test_a_rule_is_one_module_found_by_discovery():
    """Issue 41: a new rule kind is one module in `app/rules/` (section model, rule class, builder, example,
    entry) and its test: `RULES` finds its `RuleEntry`, the registry imports no rule module, the config's union
    and kinds are derived from the registry, and each entry declares its section model beside its rule class."""
    from campusguard.app.rules.registry import RULES

    for entry in RULES:
        module = entry.config.__module__
        assert module == entry.rule_type.__module__ == entry.build.__module__, entry.kind
        assert module.startswith("campusguard.app.rules."), module
    assert _registry_imports("app/rules/registry.py") == {
        "campusguard.app.rules.base",
        "campusguard.app.rules.spec",
        "campusguard.errors",
        "campusguard.plugins",
    }
    # a kind configured by a camera section of its own (`health`) is that section's model, named by the
    # camera and root sections like any section; the kinds of `rules` items are derived from the registry
    rule_modules = {e.config.__module__ for e in RULES if e.section is None}
    for path in sorted((PACKAGE / "app" / "config").glob("*.py")):
        named = imported_modules(path) & rule_modules
        assert not named, f"config/{path.name} names rule modules {sorted(named)}: derive from RULES instead"


def test_a_backend_is_one_module_and_nothing_outside_it_names_it():
    """Issue 41: each backend's entry (with its builder, quantiser, profiler and verdicts, as functions, never
    ``"module:function"`` strings) is declared in its own ``backends/*_backend.py`` module, the registry imports
    none of them, and no code outside ``backends/`` compares anything with a backend's name: it asks the
    entry's capabilities (`BackendSpec.device_pipeline`, ``auto_device``, ``fp16_cast``, ``set_threads``)."""
    import sys

    from campusguard.backends.registry import BACKENDS

    for spec in BACKENDS.values():
        module = spec.build.__module__
        assert module.startswith("campusguard.backends.") and module.endswith("_backend"), module
        assert getattr(sys.modules[module], "SPEC", None) is spec or spec in vars(sys.modules[module]).values()
        for name in ("profiler", "verdicts", "int8_export", "device_pipeline", "set_threads"):
            assert getattr(spec, name) is None or callable(getattr(spec, name)), (spec.name, name)
    assert _registry_imports("backends/registry.py") == {
        "campusguard.backends.spec",
        "campusguard.errors",
        "campusguard.plugins",
    }
    registry_strings = [
        n.value
        for n in ast.walk(ast.parse((PACKAGE / "backends" / "registry.py").read_text()))
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("campusguard.")
    ]
    assert registry_strings == []
    names = set(BACKENDS)

    def named(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in names
        return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(named(e) for e in node.elts)

    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] == "backends":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare) and any(named(n) for n in [node.left, *node.comparators]):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert offenders == [], "code outside backends/ branches on a backend's name: " + ", ".join(offenders)


_ECHO_MODULE = '''"""A throwaway engine: runs nothing, returns an empty head output of the model's shape."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from campusguard.backends.base import LoadOptions
from campusguard.backends.spec import BackendSpec
from campusguard.models.resolve import parse_model_ref, read_model_info


class EchoBackend:
    name = "echo"

    def __init__(self, path: Path) -> None:
        self.info = read_model_info(parse_model_ref(path))
        self.provider = "echo:cpu"

    def infer(self, batch: np.ndarray) -> np.ndarray:
        return np.zeros((batch.shape[0], 4 + len(self.info.names), 8), np.float32)


def build(path: Path, options: LoadOptions) -> EchoBackend:
    return EchoBackend(path)


SPEC = BackendSpec(
    name="echo",
    summary="a throwaway engine",
    build=build,
    reads=("onnx",),
    devices=("cpu",),
    precisions=("fp32",),
    bench=(("echo", "host", False),),
    cpu_trial=("fp32",),
    formats=(("fp32", "cpu", ""),),
)
'''

_ECHO_CHECKS = """
import json, subprocess, sys
from pathlib import Path
from campusguard.app.config.detector import DetectorConfig
from campusguard.backends.registry import BACKEND_NAMES, FORMATS
from campusguard.bench.prepare import BACKENDS, VARIANTS, skip_reason
from campusguard.detector import Detector
from campusguard.doctor import collect_environment
from campusguard.models.resolve import parse_model_ref
from campusguard.precision import trial_candidates

model = Path(sys.argv[1])
det = Detector(model, backend="echo", device="cpu")
found = {
    "names": "echo" in BACKEND_NAMES,
    "config": DetectorConfig(backend="echo").backend == "echo"
    and "echo" in json.dumps(DetectorConfig.model_json_schema()["properties"]["backend"]),
    "bench": "echo" in BACKENDS and VARIANTS["echo"] == ("echo", "host", False),
    "skip": skip_reason(parse_model_ref(model), "echo", "fp32", "cpu") is None,
    "formats": "echo" in FORMATS["fp32"]["backends"].split(","),
    "doctor": any(v["backend"] == "echo" for v in collect_environment(include_torch=False)["verdicts"]),
    "trial": "echo-fp32" in trial_candidates(model),
    "detector": det.provider == "echo:cpu" and len(det(__import__("numpy").zeros((48, 64, 3), "uint8"))) == 0,
}
for command in ("predict", "bench"):
    help_text = subprocess.run(
        [sys.executable, "-m", "campusguard.cli.main", command, "--help"], capture_output=True, text=True
    ).stdout
    found[command + "-help"] = "echo" in help_text
print(json.dumps(found))
"""


def test_a_new_backend_is_one_module_dropped_into_backends(tmp_path: Path):
    """Issue 41: a copy of the package with one new module, ``backends/echo_backend.py``, declaring its
    `BackendSpec`; every derived list (config literal, CLI help, bench variants, skip rules, formats, doctor,
    the engine trial) and `Detector` pick it up, with no other file touched."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    from factories import build_tiny_detector_onnx

    root = tmp_path / "src"
    shutil.copytree(PACKAGE, root / "campusguard", ignore=shutil.ignore_patterns("__pycache__", "*.onnx"))
    backends = root / "campusguard" / "backends"
    (backends / "echo_backend.py").write_text(_ECHO_MODULE)
    model = build_tiny_detector_onnx(tmp_path / "tiny.onnx")
    env = {**os.environ, "PYTHONPATH": str(root), "CAMPUSGUARD_CACHE": str(tmp_path / "cache")}
    proc = subprocess.run(
        [sys.executable, "-c", _ECHO_CHECKS, str(model)], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found == dict.fromkeys(found, True) and len(found) == 10, found
