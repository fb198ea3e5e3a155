"""`campusguard doctor`: diagnose GPUs, runtimes and which backend really runs where."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from campusguard.errors import CampusGuardError, DeviceError


def _gib(n: int | None) -> str:
    return "?" if not n else f"{n / 1024**3:.1f} GiB"


def register(app: typer.Typer) -> None:
    @app.command()
    def doctor(
        as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
        device: str = typer.Option(
            None, "--device", help="Also check that this device (cuda:N, rocm:N, cpu) works end to end."
        ),
        no_torch: bool = typer.Option(False, "--no-torch", help="Skip importing PyTorch (faster)."),
    ) -> None:
        """Report OS, CPU, RAM, package versions, GPUs, visible-device variables, ONNX Runtime providers and per-backend verdicts."""
        from campusguard.doctor import collect_environment

        env = collect_environment(include_torch=not no_torch)
        check = None
        if device is not None:
            check = _check_device(device)
            env["device_check"] = check
        if as_json:
            typer.echo(json.dumps(env, indent=2, default=str))
        else:
            _print(env, skipped_torch=no_torch)
        if check and check["status"] != "ok":
            raise DeviceError(check["error"])


def _check_device(device: str) -> dict[str, str]:
    """Create a tiny ONNX Runtime session on ``device`` and report the provider it really uses."""
    from campusguard.backends.devices import resolve_device
    from campusguard.backends.onnxruntime_backend import providers_for

    try:
        spec = resolve_device(device)
        import onnxruntime as ort

        providers = providers_for(spec, ort.get_available_providers())
        return {
            "device": str(spec),
            "status": "ok",
            "providers": ", ".join(p[0] if isinstance(p, tuple) else p for p in providers),
        }
    except CampusGuardError as exc:
        return {"device": device, "status": "error", "error": str(exc)}


def _print(env: dict, skipped_torch: bool = False) -> None:
    console = Console()
    t = Table(title="CampusGuard doctor", show_header=False)
    t.add_row("OS", f"{env['os']} ({env['machine']})")
    cpu = env["cpu"]
    t.add_row(
        "CPU",
        f"{cpu['name']}, {cpu['physical_cores']} cores / {cpu['logical_cores']} threads, {' '.join(cpu['flags'])}",
    )
    advice = env["precision"]
    t.add_row("Precision", f"{advice['recommended'].upper()} ({advice['model']}): {advice['reason']}")
    t.add_row("RAM", _gib(env["ram_bytes"]))
    t.add_row("Python", env["python"])
    t.add_row("Packages", ", ".join(f"{k} {v}" for k, v in env["packages"].items()))
    torch = env["torch"]
    if torch is None:
        t.add_row(
            "PyTorch",
            escape("not checked (--no-torch)" if skipped_torch else "not installed (pip install 'campusguard[torch]')"),
        )
    elif torch.get("error", "").startswith("not checked"):
        t.add_row("PyTorch", "not checked (--no-torch)")
    elif "error" in torch:
        t.add_row("PyTorch", f"broken: {torch['error']}")
    else:
        t.add_row("PyTorch", f"{torch['version']} ({torch['build']}), GPU available: {torch['gpu_available']}")
    if env["gpus"]:
        for g in env["gpus"]:
            t.add_row(f"GPU {g['index']}", f"{g['vendor']}: {g['name']}, {_gib(g['memory_total'])} (via {g['source']})")
    else:
        t.add_row("GPUs", "none found")
    t.add_row(
        "Visible devices",
        ", ".join(f"{k}={v}" for k, v in env["visible_devices"].items() if v is not None)
        or "(no *_VISIBLE_DEVICES set)",
    )
    for p in env["visible_devices_problems"]:
        t.add_row("[red]Problem[/red]", p)
    ort = env["onnxruntime"]
    t.add_row("ONNX Runtime", f"{ort['version']}, providers: {', '.join(ort['providers'])}")
    if "MIGraphXExecutionProvider" in ort["providers"] or "onnxruntime-migraphx" in env["packages"]:
        t.add_row("MIGraphX cache", f"{ort['migraphx_cache']} (one directory per model, shape and precision)")
    for v in env["verdicts"]:
        colour = {"ready": "green", "cpu-only": "yellow"}.get(v["status"], "red")
        t.add_row(
            "Verdict",
            f"{v['backend']}: [{colour}]{v['status']}[/{colour}]"
            + (escape(f" ({v['detail']})") if v["detail"] else ""),
        )
    if "device_check" in env:
        c = env["device_check"]
        t.add_row("Device check", f"{c['device']}: {c['status']} {c.get('providers', c.get('error', ''))}")
    console.print(t)
