"""`campusguard doctor`: diagnose GPUs, runtimes and which backend really runs where."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from campusguard.errors import CampusGuardError, DeviceError, InvalidInputError


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
        calibrate: bool = typer.Option(
            False,
            "--calibrate",
            help="Time every engine and precision of --model (ONNX Runtime FP32/INT8, OpenVINO FP32/BF16/INT8 where "
            "installed) now on the CPU and store the choice `precision: auto` uses.",
        ),
        model: str = typer.Option(None, "--model", help="With --calibrate: an ONNX model (default: the bundled one)."),
        imgsz: str = typer.Option(
            None, "--imgsz", help="With --calibrate: the detector's imgsz (N or H,W; default: the model's own)."
        ),
        budget_s: float = typer.Option(
            3.0, "--budget", min=0.5, max=120.0, help="With --calibrate: seconds the trial may take."
        ),
    ) -> None:
        """Report OS, CPU, RAM, package versions, GPUs, visible-device variables, ONNX Runtime providers and per-backend verdicts."""
        from campusguard.doctor import collect_environment

        if calibrate:
            _calibrate(model, imgsz, budget_s, as_json)
            return
        if model is not None or imgsz is not None:
            raise InvalidInputError("--model and --imgsz go with --calibrate")
        env = collect_environment(include_torch=not no_torch)
        env["precision"]["calibrations"] = _stored_trials(env["cpu"]["name"])
        check = None
        if device is not None:
            check = _check_device(device)
            env["device_check"] = check
        if as_json:  # no secret in a report people paste into tickets (a proxy URL with a password)
            from campusguard.app.infra.secrets import redact_mapping

            typer.echo(json.dumps(redact_mapping(env), indent=2, default=str))
        else:
            _print(env, skipped_torch=no_torch)
        if check and check["status"] != "ok":
            raise DeviceError(check["error"])


def _stored_trials(cpu: str) -> list[dict[str, Any]]:
    """The precision choice in force per model, input shape and provider on this CPU (the newest
    stored trial: older ones were for files or versions since replaced), with ``older_trials``
    counting the others; newest first."""
    from campusguard.precision_cache import cached_calibrations

    newest: dict[tuple[str, tuple[int, int], str], dict[str, Any]] = {}
    for c in cached_calibrations():  # newest first
        if c.key.cpu != cpu:
            continue
        key = (c.model, c.result.input_hw, c.key.provider)
        if key in newest:
            newest[key]["older_trials"] += 1
        else:
            newest[key] = {**c.summary(), "older_trials": 0}
    return list(newest.values())


def _calibrate(model: str | None, imgsz: str | None, budget_s: float, as_json: bool) -> None:
    """Run the precision trial now (ignoring what is stored), store it and print its figures."""
    from campusguard.app.config import DetectorConfig
    from campusguard.detector import Detector
    from campusguard.doctor import cpu_name
    from campusguard.models.info import check_imgsz
    from campusguard.models.resolve import default_model_path
    from campusguard.precision import trial_candidates
    from campusguard.precision_cache import calibrate, calibration_file

    path = default_model_path() if model is None else Path(model)
    if path.suffix != ".onnx" or not path.is_file():
        raise InvalidInputError(f"--model {model}: not an ONNX file; the trial compares an ONNX model's variants")
    hw = None if imgsz is None else check_imgsz(imgsz, name="--imgsz")
    variants = trial_candidates(path)
    if len(variants) < 2:
        raise InvalidInputError(
            f"{path.name} has no INT8 variant next to it ({path.stem}-int8.onnx or {path.stem}.int8.onnx) and no other "
            "engine is installed: nothing to compare; make one with `campusguard export MODEL --int8 --data IMAGES`"
        )
    app = DetectorConfig()  # the app's defaults, so `watch` measures the same detector

    def build(p: Path, backend: str | None = None, precision: str | None = None) -> Detector:
        return Detector(
            p, device="cpu", imgsz=hw, threads=app.threads, spinning=app.spinning, backend=backend, precision=precision
        )

    calibration, _ = calibrate(variants, build, imgsz=hw, budget_s=budget_s, fresh=True)
    summary = calibration.summary()
    if as_json:
        typer.echo(json.dumps({**summary, "cache_file": str(calibration_file(calibration.key))}, indent=2))
        return
    r = calibration.result
    h, w = r.input_hw
    typer.echo(f"precision trial: {path.name} at {h}x{w} on {cpu_name()} ({calibration.key.provider})")
    for v in r.variants:
        verdict = "" if v.accepted else f"  REFUSED: {v.note}"
        check = f"  [{v.parity}]" if v.parity else ""
        figure = f"{v.ms:7.1f} ms per frame (median of {v.runs})" if v.runs else "    not run"
        typer.echo(f"  {v.precision:15} {figure}{verdict}{check}")
    typer.echo(f"chosen: {r.chosen.upper()} ({Path(r.model).name}): {r.reason}")
    typer.echo(f"measured in {r.seconds:.1f} s; stored in {calibration_file(calibration.key)}")


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
    rule = advice["instruction_sets"]
    t.add_row("INT8 instructions", escape(f"{rule['reason']} (information only: `precision: auto` measures)"))
    for c in advice["calibrations"]:
        h, w = c["input_hw"]
        figures = ", ".join(
            f"{p} " + ("not run" if ms is None else f"{ms:.1f} ms") + (" (refused)" if p in c["refused"] else "")
            for p, ms in c["ms"].items()
        )
        t.add_row(
            "Precision",
            escape(
                f"{c['chosen'].upper()} for {Path(c['model']).name} at {h}x{w}: {figures} per frame; "
                f"measured {c['measured_at']}"
                + (f" ({c['older_trials']} older trial{'s' * (c['older_trials'] != 1)} replaced)" if c["older_trials"] else "")
            ),
        )
    if not advice["calibrations"]:
        t.add_row("Precision", escape("no trial cached for this CPU; `campusguard doctor --calibrate` measures now"))
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
