"""Merge benchmark results from several machines into one matrix with deltas against a baseline.

Rows are keyed by (model, backend, precision, batch, scenario); the same key on two machines
gives a relative delta (``+0.07`` is 7% more). A second machine's result file needs nothing
but to be passed in: machines are told apart by the ``machine`` field of each file, and the
baseline is chosen by that name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from campusguard.backends.registry import BACKENDS, DEFAULT_BACKEND
from campusguard.bench.results import find_result_files, load_result
from campusguard.bench.stats import relative_delta
from campusguard.errors import InvalidInputError

__all__ = ["Row", "Comparison", "load_results", "merge_results", "compare", "conclusions", "RowKey"]

RowKey = tuple[str, str, str, int, str]
"""(model, backend, precision, batch, scenario)."""


@dataclass
class Row:
    """One combination on one machine, with the figures the report shows (None where not measured)."""

    machine: str
    model: str
    backend: str
    precision: str
    batch: int
    scenario: str
    status: str
    reason: str | None
    fps: float | None = None
    p50_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None
    first_inference_ms: float | None = None
    rss_peak_mb: float | None = None
    rss_slope_mb_per_s: float | None = None
    rss_growth_mb: float | None = None
    device_mem_mb: float | None = None
    map50_95: float | None = None
    map50: float | None = None
    accuracy_note: str | None = None
    cost_per_million: float | None = None
    price_per_hour: float | None = None
    stages_ms: dict[str, float] = field(default_factory=dict)
    repeat_spread: float | None = None
    repeat_other_shares: list[float] = field(default_factory=list)
    other_cpu_share: float | None = None
    cpu_ms_per_image: float | None = None
    provider: str | None = None
    nms: str | None = None
    samples_ms: list[float] = field(default_factory=list)
    deltas: dict[str, float | None] = field(default_factory=dict)
    input_hw: tuple[int, int] | None = None
    device: str | None = None
    source: str | None = None
    cpu_cores: int | None = None
    gpu_count: int | None = None

    @property
    def key(self) -> RowKey:
        return (self.model, self.backend, self.precision, self.batch, self.scenario)

    @property
    def label(self) -> str:
        tag = f"{self.batch} streams" if self.scenario == "multi-stream" else f"b{self.batch}"
        return f"{self.model} {self.backend} {self.precision} {tag}"


@dataclass
class Comparison:
    """The merged matrix: rows of every machine, the baseline machine's name and the source files."""

    rows: list[Row]
    baseline: str
    machines: list[str]
    sources: list[str]
    commands: dict[str, list[str]]
    notes: dict[str, list[str]]


def load_results(paths: Sequence[str | Path]) -> list[tuple[Path, dict[str, Any]]]:
    """Load and validate every result file named or found in folders."""
    return [(p, load_result(p)) for p in find_result_files(paths)]


def _model_label(model: str) -> str:
    """Architecture names as they are; model files by file name (paths differ between machines)."""
    return Path(model).name if "/" in model or "\\" in model else model


def _row(machine: str, rec: dict[str, Any], price: float | None) -> Row:
    lat = rec.get("latency_ms") or {}
    mem = rec.get("memory") or {}
    acc = rec.get("accuracy") or {}
    first = rec.get("first_inference_ms") or {}
    return Row(
        machine=machine,
        model=_model_label(str(rec["model"])),
        backend=str(rec["backend"]),
        precision=str(rec["precision"]),
        batch=int(rec["batch"]),
        scenario=str(rec.get("scenario", "batch")),
        status=str(rec["status"]),
        reason=rec.get("reason"),
        fps=rec.get("throughput_ips"),
        p50_ms=lat.get("p50"),
        p90_ms=lat.get("p90"),
        p99_ms=lat.get("p99"),
        first_inference_ms=first.get("total_ms"),
        rss_peak_mb=mem.get("host_rss_peak_mb"),
        rss_slope_mb_per_s=mem.get("host_rss_slope_mb_per_s"),
        rss_growth_mb=(
            mem["host_rss_end_mb"] - mem["host_rss_start_mb"]
            if mem.get("host_rss_end_mb") is not None and mem.get("host_rss_start_mb") is not None
            else None
        ),
        device_mem_mb=mem.get("device_peak_mb"),
        map50_95=acc.get("map50_95"),
        map50=acc.get("map50"),
        accuracy_note=acc.get("reason"),
        cost_per_million=rec.get("cost_per_million_usd"),
        price_per_hour=price,
        stages_ms=dict(rec.get("stages_ms") or {}),
        repeat_spread=rec.get("repeat_spread"),
        repeat_other_shares=[
            float(x["other_processes_cpu_share"])
            for x in rec.get("repeats") or []
            if x.get("other_processes_cpu_share") is not None
        ],
        other_cpu_share=(rec.get("contention") or {}).get("other_processes_cpu_share"),
        cpu_ms_per_image=(rec.get("contention") or {}).get("cpu_ms_per_image"),
        provider=rec.get("provider"),
        nms=rec.get("nms"),
        samples_ms=list(rec.get("samples_ms") or []),
        input_hw=(int(rec["input_hw"][0]), int(rec["input_hw"][1])) if rec.get("input_hw") else None,
        device=rec.get("device"),
    )


def _machine_size(environment: Any) -> tuple[int | None, int | None]:
    """(logical CPU cores, GPUs) from a result's environment fingerprint; None where not recorded."""
    env = environment if isinstance(environment, dict) else {}
    cpu = env.get("cpu")
    cores = cpu.get("logical_cores") if isinstance(cpu, dict) else None
    gpus = env.get("gpus")
    return (
        int(cores) if isinstance(cores, int) and cores > 0 else None,
        len(gpus) if isinstance(gpus, list) else None,
    )


def merge_results(
    results: Sequence[tuple[Path, dict[str, Any]]],
    by_input_shape: bool = False,
) -> tuple[list[Row], dict[str, list[str]], dict[str, list[str]]]:
    """Rows of all files; for a key measured twice on one machine the later run (``created_utc``) wins.

    With ``by_input_shape`` the network input (height, width) is part of the key, so runs of one
    combination at several input shapes are all kept (the capacity plan chooses among them).
    """
    chosen: dict[tuple[str, RowKey, tuple[int, int] | None], tuple[str, Row]] = {}
    commands: dict[str, list[str]] = {}
    notes: dict[str, list[str]] = {}
    for path, res in results:
        machine = str(res["machine"])
        commands.setdefault(machine, []).append(str(res.get("command", "")))
        if res.get("notes"):
            notes.setdefault(machine, []).append(str(res["notes"]))
        price = (res.get("config") or {}).get("price_per_hour")
        created = str(res.get("created_utc", ""))
        cores, gpus = _machine_size(res.get("environment"))
        for rec in res.get("results", []):
            row = _row(machine, rec, price)
            row.source = str(path)
            row.cpu_cores, row.gpu_count = cores, gpus
            k = (machine, row.key, row.input_hw if by_input_shape else None)
            if k not in chosen or created >= chosen[k][0]:
                chosen[k] = (created, row)
    return [r for _, r in chosen.values()], commands, notes


_DELTA_FIELDS = ("fps", "p50_ms", "p99_ms", "rss_peak_mb", "device_mem_mb", "cost_per_million")


def compare(paths: Sequence[str | Path], baseline: str | None = None) -> Comparison:
    """Load result files, merge them and compute deltas of every machine against ``baseline``.

    Args:
        paths: result files or folders holding them.
        baseline: machine name to compare against; default: the first machine found.

    Raises:
        InvalidInputError: no results, or a baseline that names no machine in them.
    """
    results = load_results(paths)
    rows, commands, notes = merge_results(results)
    machines = list(dict.fromkeys(str(res["machine"]) for _, res in results))
    if baseline is None:
        baseline = machines[0]
    elif baseline not in machines:
        raise InvalidInputError(
            f"baseline {baseline!r} is not a machine in these results (machines: {', '.join(machines)})"
        )
    base = {r.key: r for r in rows if r.machine == baseline and r.status == "ok"}
    for r in rows:
        b = base.get(r.key)
        if r.status != "ok" or b is None or r.machine == baseline:
            continue
        r.deltas = {f: relative_delta(getattr(r, f), getattr(b, f)) for f in _DELTA_FIELDS}
        r.deltas["map50_95_points"] = (
            (r.map50_95 - b.map50_95) * 100 if r.map50_95 is not None and b.map50_95 is not None else None
        )
    order = {m: i for i, m in enumerate(machines)}
    rows.sort(key=lambda r: (r.model, order[r.machine], r.backend, r.precision, r.scenario, r.batch))
    return Comparison(rows, baseline, machines, [str(p) for p, _ in results], commands, notes)


def _pct(x: float) -> str:
    return f"{x * 100:+.0f}%"


def _best(rows: Sequence[Row]) -> Row | None:
    ok = [r for r in rows if r.status == "ok" and r.fps and r.scenario == "batch"]
    return max(ok, key=lambda r: r.fps or 0.0) if ok else None


def conclusions(
    cmp: Comparison,
    repeat_tolerance: float = 0.10,
    contention_warn: float = 0.10,
    leak_slope_mb_per_s: float = 1.0,
    leak_growth_mb: float = 8.0,
) -> list[str]:
    """Plain sentences an engineer would write after the study, each backed by a number in the table.

    Args:
        cmp: the comparison.
        repeat_tolerance: spread of repeat medians above which a combination is called not repeatable.
        contention_warn: share of the CPU used by other processes above which a machine's numbers are flagged.
        leak_slope_mb_per_s: host RSS slope (MiB/s) above which a run may leak...
        leak_growth_mb: ...when RSS also ended this many MiB above where the timed phase started.
    """
    out: list[str] = []
    ok = [r for r in cmp.rows if r.status == "ok"]
    for m in dict.fromkeys(r.model for r in ok):
        for machine in cmp.machines:
            if machine != cmp.baseline:
                out += _against_baseline_sentences(cmp, ok, m, machine)
    for machine in cmp.machines:
        rows = [r for r in ok if r.machine == machine and r.scenario == "batch"]
        idx = {r.key: r for r in rows}
        out += _precision_sentences(machine, rows, idx)
        out += _backend_sentences(machine, rows, idx)
        out += _batching_sentences(machine, rows)
        out += _stage_sentences(machine, rows)
    out += _cost_sentences(ok)
    out += _repeatability_sentences(ok, repeat_tolerance)
    for machine in cmp.machines:
        mine = [r for r in ok if r.machine == machine]
        out += _contention_sentences(machine, mine, contention_warn)
        out += _memory_sentences(machine, mine, leak_slope_mb_per_s, leak_growth_mb)
    out += _not_run_sentences(cmp.rows)
    return out


def _against_baseline_sentences(cmp: Comparison, ok: Sequence[Row], m: str, machine: str) -> list[str]:
    """``machine`` against the baseline on model ``m``: like for like, and best against best."""
    out = []
    mine = [r for r in ok if r.model == m and r.machine == machine and r.deltas]
    same = sorted(
        (r for r in mine if r.scenario == "batch" and r.deltas.get("fps") is not None),
        key=lambda r: r.fps or 0.0,
        reverse=True,
    )
    if same:
        r = same[0]
        parts = []
        if (fps := r.deltas.get("fps")) is not None:  # always: ``same`` keeps rows with an FPS delta
            parts.append(f"FPS {_pct(fps)}")
        if (p50 := r.deltas.get("p50_ms")) is not None:
            parts.append(f"p50 latency {_pct(p50)}")
        if (cost := r.deltas.get("cost_per_million")) is not None:
            parts.append(f"cost per image {_pct(cost)}")
        if r.deltas.get("map50_95_points") is not None:
            parts.append(f"mAP50-95 {r.deltas['map50_95_points']:+.1f} points")
        out.append(
            f"{machine} vs {cmp.baseline} on {m} ({r.backend} {r.precision}, batch {r.batch}, like for like): "
            + ", ".join(parts)
            + "."
        )
    b_best = _best([r for r in ok if r.model == m and r.machine == cmp.baseline])
    m_best = _best([r for r in ok if r.model == m and r.machine == machine])
    if b_best and m_best and b_best.fps and m_best.fps:
        out.append(
            f"Best {m} configuration on each machine: {machine} {m_best.backend} {m_best.precision} batch "
            f"{m_best.batch} at {m_best.fps:.1f} img/s against {cmp.baseline} {b_best.backend} "
            f"{b_best.precision} batch {b_best.batch} at {b_best.fps:.1f} img/s ({m_best.fps / b_best.fps:.1f}x)."
        )
    return out


def _backend_sentences(machine: str, rows: Sequence[Row], idx: dict[RowKey, Row]) -> list[str]:
    """The default backend against each other backend on ``machine``, for every combination measured on both."""
    base = BACKENDS[DEFAULT_BACKEND]
    out = []
    for other in BACKENDS.values():
        if other.name == base.name:
            continue
        pairs = [
            (r, idx[(r.model, other.name, r.precision, r.batch, "batch")])
            for r in rows
            if r.backend == base.name and (r.model, other.name, r.precision, r.batch, "batch") in idx
        ]
        pairs = [(a, b) for a, b in pairs if a.fps and b.fps]
        if not pairs:
            continue
        ratios = [(a.fps or 0.0) / (b.fps or 1.0) for a, b in pairs]
        out.append(
            f"{base.title} against {other.title} on {machine}: {min(ratios):.1f}x to {max(ratios):.1f}x "
            f"{other.title}'s throughput ("
            + ", ".join(f"{a.model} {a.precision} b{a.batch} {x:.1f}x" for (a, _), x in zip(pairs, ratios, strict=True))
            + ")."
        )
    return out


def _batching_sentences(machine: str, rows: Sequence[Row]) -> list[str]:
    """Throughput of the largest against the smallest batch on ``machine``, and the latency it costs."""
    scaling = []
    for key in dict.fromkeys((r.model, r.backend, r.precision) for r in rows):
        sizes = sorted((r for r in rows if (r.model, r.backend, r.precision) == key), key=lambda r: r.batch)
        if len(sizes) >= 2 and sizes[0].fps and sizes[-1].fps:
            scaling.append((key, sizes[0], sizes[-1], (sizes[-1].fps or 0.0) / (sizes[0].fps or 1.0) - 1))
    if not scaling:
        return []
    lo_b, hi_b = scaling[0][1].batch, scaling[0][2].batch
    return [
        f"Batching on {machine} (largest against smallest batch, e.g. {hi_b} against {lo_b}): throughput "
        f"{_pct(min(x for *_, x in scaling))} to {_pct(max(x for *_, x in scaling))} ("
        + ", ".join(f"{k[0]} {k[1]} {k[2]} {_pct(x)}" for k, _, _, x in scaling)
        + "), at the price of p50 latency per batch up to "
        + f"{max((h.p50_ms or 0.0) for _, _, h, _ in scaling):.0f} ms."
    ]


def _stage_sentences(machine: str, rows: Sequence[Row]) -> list[str]:
    """Where the time goes on ``machine`` at its largest batch: the network call's share of each call."""
    staged = [r for r in rows if r.stages_ms and sum(r.stages_ms.values()) > 0]
    if not staged:
        return []
    biggest = max(r.batch for r in staged)
    shares = [r.stages_ms.get("inference", 0.0) / sum(r.stages_ms.values()) for r in staged if r.batch == biggest]
    verdict = (
        "host-bound: pre- and post-processing on the CPU take the rest"
        if max(shares) < 0.6
        else "the network dominates"
    )
    return [
        f"Where the time goes on {machine} at batch {biggest}: the network call is {min(shares):.0%} to "
        f"{max(shares):.0%} of each call ({verdict})."
    ]


def _cost_sentences(ok: Sequence[Row]) -> list[str]:
    priced = [r for r in ok if r.cost_per_million is not None and r.scenario == "batch"]
    if not priced:
        return []
    cheapest = min(priced, key=lambda r: r.cost_per_million or 0.0)
    return [
        f"Cheapest per image: {cheapest.machine} {cheapest.label} at ${cheapest.cost_per_million:.2f} per million images."
    ]


def _repeatability_sentences(ok: Sequence[Row], repeat_tolerance: float) -> list[str]:
    """How many repeated combinations agree on the median, and the worst spread with its CPU contention."""
    spreads = [r for r in ok if r.repeat_spread is not None]
    if not spreads:
        return []
    bad = [r for r in spreads if (r.repeat_spread or 0.0) > repeat_tolerance]
    worst = max(spreads, key=lambda r: r.repeat_spread or 0.0)
    sentence = (
        f"Repeatability: {len(spreads) - len(bad)} of {len(spreads)} repeated combinations agree within "
        f"{repeat_tolerance:.0%} on the median; the worst spread is {worst.repeat_spread:.1%} "
        f"({worst.machine} {worst.label})"
    )
    if len(worst.repeat_other_shares) >= 2:
        phases = ", ".join(f"{x:.0%}" for x in worst.repeat_other_shares)
        sentence += f", while other processes used {phases} of the CPU in its repeats"
    return [sentence + "."]


def _contention_sentences(machine: str, rows: Sequence[Row], contention_warn: float) -> list[str]:
    """A warning when other processes used more than ``contention_warn`` of ``machine``'s CPU."""
    shares = [r.other_cpu_share for r in rows if r.other_cpu_share is not None]
    if not shares or max(shares) <= contention_warn:
        return []
    return [
        f"Other processes used {sum(shares) / len(shares):.0%} of {machine}'s CPU on average during its timed "
        f"runs (up to {max(shares):.0%}): its figures are lower bounds of what the machine does alone."
    ]


def _memory_sentences(machine: str, rows: Sequence[Row], slope_mb_per_s: float, growth_mb: float) -> list[str]:
    """A possible leak (RSS slope and growth both over their limits) on ``machine``, or the largest growth seen."""
    leaks = [r for r in rows if (r.rss_slope_mb_per_s or 0.0) > slope_mb_per_s and (r.rss_growth_mb or 0.0) > growth_mb]
    if leaks:
        worst = max(leaks, key=lambda r: r.rss_slope_mb_per_s or 0.0)
        return [
            f"Host memory grew by {worst.rss_growth_mb:.0f} MiB ({worst.rss_slope_mb_per_s:.1f} MiB/s) during "
            f"{machine} {worst.label}: look for a leak."
        ]
    slopes = [r for r in rows if r.rss_slope_mb_per_s is not None]
    if not slopes:
        return []
    top = max(slopes, key=lambda r: r.rss_growth_mb or 0.0)
    return [
        f"No leak on {machine}: host RSS ended at most {max(top.rss_growth_mb or 0.0, 0.0):.0f} MiB above "
        f"where each timed phase started ({len(slopes)} combinations)."
    ]


def _not_run_sentences(rows: Sequence[Row]) -> list[str]:
    """The combinations that did not run, grouped by machine, status and reason."""
    notdone = [r for r in rows if r.status != "ok"]
    if not notdone:
        return []
    reasons: dict[tuple[str, str, str | None], list[Row]] = {}
    for r in notdone:
        reasons.setdefault((r.machine, r.status, r.reason), []).append(r)
    return [
        f"{len(notdone)} combination(s) did not run: "
        + "; ".join(
            f"{len(rs)} on {m} {status} ({reason}: "
            + ", ".join(dict.fromkeys(f"{r.model} {r.backend} {r.precision}" for r in rs))
            + ")"
            for (m, status, reason), rs in reasons.items()
        )
        + "."
    ]


def _precision_sentences(machine: str, rows: Sequence[Row], idx: dict[RowKey, Row]) -> list[str]:
    """One sentence per lower precision and backend on ``machine``: throughput ratios to FP32, CPU time, mAP."""
    out = []
    groups: dict[tuple[str, str], list[tuple[Row, Row]]] = {}
    for r in rows:
        ref = idx.get((r.model, r.backend, "fp32", r.batch, "batch"))
        if r.precision != "fp32" and ref and ref.fps and r.fps:
            groups.setdefault((r.precision, r.backend), []).append((r, ref))
    for (precision, backend), pairs in groups.items():
        ratios = [(r.fps or 0.0) / (ref.fps or 1.0) for r, ref in pairs]
        sentence = (
            f"{precision.upper()} against FP32 on {machine} ({backend}): {min(ratios):.2f}x to {max(ratios):.2f}x the "
            "throughput ("
            + ", ".join(f"{r.model} b{r.batch} {x:.2f}x" for (r, _), x in zip(pairs, ratios, strict=True))
            + ")"
        )
        cpu = [
            (ref.cpu_ms_per_image / r.cpu_ms_per_image)
            for r, ref in pairs
            if r.cpu_ms_per_image and ref.cpu_ms_per_image
        ]
        if cpu:
            sentence += f"; by CPU time per image, which other jobs on the machine disturb less, {min(cpu):.2f}x to {max(cpu):.2f}x"
        maps = [
            (r.model, (r.map50_95 - ref.map50_95) * 100)
            for r, ref in pairs
            if r.map50_95 is not None and ref.map50_95 is not None
        ]
        if maps:
            sentence += "; mAP50-95 " + ", ".join(f"{d:+.1f} points ({m})" for m, d in dict(maps).items())
        out.append(sentence + ".")
    return out


def run_to_run(first: dict[str, Any], second: dict[str, Any], tolerance: float = 0.10) -> list[dict[str, Any]]:
    """Agreement of two runs of the same matrix: per combination run in both, the medians and their spread.

    Args:
        first: a result document.
        second: a later result document (normally of the same machine).
        tolerance: largest relative spread (``max / min - 1``) of the two medians that counts as agreement.

    Returns:
        One dict per common ``ok`` combination: ``label``, ``p50_first_ms``, ``p50_second_ms``,
        ``spread``, ``agree``.
    """

    def ok_rows(doc: dict[str, Any]) -> dict[RowKey, Row]:
        rows = [_row(str(doc["machine"]), rec, None) for rec in doc.get("results", [])]
        return {r.key: r for r in rows if r.status == "ok" and r.p50_ms}

    a, b = ok_rows(first), ok_rows(second)
    out = []
    for key in a:
        if key not in b:
            continue
        pa, pb = float(a[key].p50_ms or 0.0), float(b[key].p50_ms or 0.0)
        s = max(pa, pb) / min(pa, pb) - 1.0
        out.append(
            {"label": a[key].label, "p50_first_ms": pa, "p50_second_ms": pb, "spread": s, "agree": s <= tolerance}
        )
    return out
