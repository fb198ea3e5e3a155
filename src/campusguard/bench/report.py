"""The compare report: Markdown (plots as PNG files beside it) and one self-contained HTML file.

Plots (matplotlib, Agg backend):

- ``throughput.png``: best throughput (over batch sizes) by model, one bar per machine, backend and precision;
- ``latency.png``: distributions of per-batch latency at batch 1 (single-stream), one box per combination;
- ``stages.png``: pre-processing / inference / post-processing split at batch 1;
- ``per_dollar.png``: images per US dollar (only when a price per hour was given).
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from campusguard.bench.compare import Comparison, Row, conclusions
from campusguard.errors import require

__all__ = ["write_report", "markdown_table", "plot_all"]


def _save_figure(fig: Any, path: Path) -> Path:
    """Lay out, write as PNG (110 dpi) and close a matplotlib figure; return its path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:,.{digits}f}"


def _delta(x: float | None) -> str:
    return "" if x is None else f" ({x * 100:+.0f}%)"


def markdown_table(rows: Sequence[Row]) -> str:
    """The merged matrix as a Markdown table; deltas against the baseline machine in brackets."""
    head = (
        "| machine | model | NMS | backend | precision | batch | scenario | status | FPS (img/s) | p50 ms | p99 ms "
        "| first inference ms | host RSS peak MiB | RSS slope MiB/s | device MiB | mAP50-95 | mAP50 | $ per M images |"
    )
    sep = "|" + "---|" * 18
    lines = [head, sep]
    for r in rows:
        if r.status != "ok":
            lines.append(
                f"| {r.machine} | {r.model} | {r.nms or '-'} | {r.backend} | {r.precision} | {r.batch} | {r.scenario} | "
                f"{r.status}: {r.reason} |" + " |" * 10
            )
            continue
        d = r.deltas
        acc = (
            (
                _fmt(r.map50_95 * 100 if r.map50_95 is not None else None),
                _fmt(r.map50 * 100 if r.map50 is not None else None),
            )
            if r.map50_95 is not None
            else ("n/a", "n/a")
        )
        lines.append(
            f"| {r.machine} | {r.model} | {r.nms or '-'} | {r.backend} | {r.precision} | {r.batch} | {r.scenario} | ok "
            f"| {_fmt(r.fps)}{_delta(d.get('fps'))} | {_fmt(r.p50_ms)}{_delta(d.get('p50_ms'))} "
            f"| {_fmt(r.p99_ms)}{_delta(d.get('p99_ms'))} | {_fmt(r.first_inference_ms, 0)} "
            f"| {_fmt(r.rss_peak_mb, 0)}{_delta(d.get('rss_peak_mb'))} | {_fmt(r.rss_slope_mb_per_s, 2)} "
            f"| {_fmt(r.device_mem_mb, 0)} | {acc[0]} | {acc[1]} "
            f"| {_fmt(r.cost_per_million, 2)}{_delta(d.get('cost_per_million'))} |"
        )
    return "\n".join(lines)


_SHORT = {
    "onnxruntime": "ORT",
    "onnxruntime-device": "ORT-dev",
    "torch": "torch",
    "torch-device": "torch-dev",
    "torch-graphs": "torch-graphs",
}


def _bar_label(r: Row, machines: int) -> str:
    prefix = f"{r.machine}\n" if machines > 1 else ""
    return f"{prefix}{_SHORT.get(r.backend, r.backend)} {r.precision}"


def plot_all(cmp: Comparison, out_dir: Path) -> dict[str, Path]:
    """Write the report's PNG plots into ``out_dir``; return them by name (missing data: plot left out)."""
    require("matplotlib", "plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    ok = [r for r in cmp.rows if r.status == "ok"]
    plots: dict[str, Path] = {}
    models = list(dict.fromkeys(r.model for r in ok))
    configs = list(dict.fromkeys((r.machine, r.backend, r.precision) for r in ok if r.scenario == "batch"))

    def best(model: str, cfg: tuple[str, str, str]) -> Row | None:
        cand = [
            r for r in ok if r.scenario == "batch" and r.model == model and (r.machine, r.backend, r.precision) == cfg
        ]
        return max(cand, key=lambda r: r.fps or 0.0) if cand else None

    if ok and configs:
        fig, ax = plt.subplots(figsize=(max(7, 1.2 * len(models) * max(1, len(configs)) / 2 + 3), 4.5))
        width = 0.8 / len(configs)
        top = 0.0
        low = math.inf
        for j, cfg in enumerate(configs):
            xs, ys, tags = [], [], []
            for i, m in enumerate(models):
                r = best(m, cfg)
                if r and r.fps:
                    xs.append(i + (j - (len(configs) - 1) / 2) * width)
                    ys.append(r.fps)
                    tags.append(f"b{r.batch}")
                    top, low = max(top, r.fps), min(low, r.fps)
            label = f"{cfg[0]} {cfg[1]} {cfg[2]}" if len(cmp.machines) > 1 else f"{cfg[1]} {cfg[2]}"
            bars = ax.bar(xs, ys, width, label=label)
            for b, t in zip(bars, tags, strict=True):
                ax.annotate(t, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom", fontsize=7)
        if low > 0 and top / low > 50:
            ax.set_yscale("log")
        nms_free = {r.model for r in ok if r.nms == "in-model"}
        ax.set_xticks(range(len(models)), [f"{m}\n(NMS-free)" if m in nms_free else m for m in models])
        ax.set_ylabel("images / s (best batch size)")
        ax.set_title("Throughput by model" + (" per machine" if len(cmp.machines) > 1 else ""))
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.grid(axis="y", alpha=0.3)
        plots["throughput"] = _save_figure(fig, out_dir / "throughput.png")

    single = [r for r in ok if r.scenario == "batch" and r.batch == 1 and r.samples_ms]
    if single:
        fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(single)), 4.8))
        ax.boxplot([r.samples_ms for r in single], showfliers=True, whis=(1, 99))
        ax.set_xticks(
            range(1, len(single) + 1),
            [f"{r.model}\n{_bar_label(r, len(cmp.machines))}" for r in single],
            fontsize=7,
        )
        values = [x for r in single for x in r.samples_ms if x > 0]
        if values and max(values) / min(values) > 50:
            ax.set_yscale("log")
        ax.set_ylabel("latency per batch of 1 (ms)")
        ax.set_title("Latency distributions, batch 1 (whiskers: p1-p99)")
        ax.grid(axis="y", alpha=0.3)
        plots["latency"] = _save_figure(fig, out_dir / "latency.png")

    staged = [r for r in ok if r.scenario == "batch" and r.batch == 1 and r.stages_ms]
    if staged:
        fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(staged)), 4.8))
        xs = list(range(len(staged)))
        bottom = [0.0] * len(staged)
        for stage in ("preprocess", "inference", "postprocess"):
            vals = [r.stages_ms.get(stage, 0.0) for r in staged]
            ax.bar(xs, vals, 0.6, bottom=bottom, label=stage)
            bottom = [a + b for a, b in zip(bottom, vals, strict=True)]
        ax.set_xticks(xs, [f"{r.model}\n{_bar_label(r, len(cmp.machines))}" for r in staged], fontsize=7)
        ax.set_ylabel("ms per batch of 1 (mean)")
        ax.set_title("Where the time goes: pre-processing, inference, post-processing")
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
        plots["stages"] = _save_figure(fig, out_dir / "stages.png")

    priced = [
        (m, cfg, r) for m in models for cfg in configs if (r := best(m, cfg)) is not None and r.price_per_hour and r.fps
    ]
    if priced:
        fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(priced)), 4.8))
        per_dollar = [r.fps * 3600.0 / r.price_per_hour for _, _, r in priced if r.fps and r.price_per_hour]
        ax.bar(range(len(priced)), per_dollar)
        ax.set_xticks(
            range(len(priced)),
            [f"{m}\n{_bar_label(r, len(cmp.machines))}\nb{r.batch}" for m, _, r in priced],
            fontsize=7,
        )
        if per_dollar and max(per_dollar) / max(min(per_dollar), 1e-9) > 50:
            ax.set_yscale("log")
        ax.set_ylabel("images per US dollar")
        ax.set_title("Throughput per dollar (best batch size)")
        ax.grid(axis="y", alpha=0.3)
        plots["per_dollar"] = _save_figure(fig, out_dir / "per_dollar.png")
    return plots


_TITLES = {
    "throughput": "Throughput by model",
    "latency": "Latency distributions (batch 1)",
    "stages": "Pre-processing / inference / post-processing",
    "per_dollar": "Throughput per dollar",
}


def _markdown(cmp: Comparison, plots: dict[str, Path], sentences: list[str], out_dir: Path) -> str:
    lines = [
        "# CampusGuard benchmark comparison",
        "",
        f"Machines: {', '.join(cmp.machines)}. Baseline: **{cmp.baseline}** (deltas in brackets are against it, "
        "for the same model, backend, precision and batch).",
        "",
        "## Conclusions",
        "",
        *[f"- {s}" for s in sentences],
        "",
        "## Matrix",
        "",
        markdown_table(cmp.rows),
        "",
        "FPS: images per second over the timed phase; p50/p99: latency per batch (per frame set for multi-stream); "
        "first inference: session creation plus first call; RSS slope: growth of host memory during the run.",
        "",
        "## Plots",
        "",
    ]
    for name, path in plots.items():
        lines += [f"### {_TITLES[name]}", "", f"![{_TITLES[name]}]({path.relative_to(out_dir).as_posix()})", ""]
    lines += ["## How these results were made", ""]
    for machine, cmds in cmp.commands.items():
        for c in dict.fromkeys(cmds):
            lines += [f"- {machine}: `{c}`"]
    for machine, notes in cmp.notes.items():
        for n in dict.fromkeys(notes):
            lines += [f"- {machine} notes: {n}"]
    lines += ["", "Sources: " + ", ".join(f"`{s}`" for s in cmp.sources), ""]
    return "\n".join(lines)


def _html(cmp: Comparison, plots: dict[str, Path], sentences: list[str]) -> str:
    def esc(x: object) -> str:
        return html.escape(str(x))

    head = [
        "machine", "model", "NMS", "backend", "precision", "batch", "scenario", "status", "FPS", "p50 ms", "p99 ms",
        "first inference ms", "RSS peak MiB", "RSS slope MiB/s", "device MiB", "mAP50-95", "mAP50", "$/M images",
    ]  # fmt: skip
    body = []
    for r in cmp.rows:
        if r.status != "ok":
            body.append(
                f"<tr class='{esc(r.status)}'><td>{esc(r.machine)}</td><td>{esc(r.model)}</td><td>{esc(r.nms or '-')}</td>"
                f"<td>{esc(r.backend)}</td>"
                f"<td>{esc(r.precision)}</td><td>{r.batch}</td><td>{esc(r.scenario)}</td>"
                f"<td colspan='11'>{esc(r.status)}: {esc(r.reason)}</td></tr>"
            )
            continue
        d = r.deltas
        cells = [
            r.machine, r.model, r.nms or "-", r.backend, r.precision, r.batch, r.scenario, "ok",
            _fmt(r.fps) + _delta(d.get("fps")), _fmt(r.p50_ms) + _delta(d.get("p50_ms")),
            _fmt(r.p99_ms) + _delta(d.get("p99_ms")), _fmt(r.first_inference_ms, 0),
            _fmt(r.rss_peak_mb, 0) + _delta(d.get("rss_peak_mb")), _fmt(r.rss_slope_mb_per_s, 2),
            _fmt(r.device_mem_mb, 0),
            _fmt(r.map50_95 * 100) if r.map50_95 is not None else "n/a",
            _fmt(r.map50 * 100) if r.map50 is not None else "n/a",
            _fmt(r.cost_per_million, 2) + _delta(d.get("cost_per_million")),
        ]  # fmt: skip
        body.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    images = []
    for name, path in plots.items():
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        images.append(
            f"<h3>{esc(_TITLES[name])}</h3><img alt='{esc(_TITLES[name])}' src='data:image/png;base64,{data}'>"
        )
    commands = "".join(
        f"<li>{esc(m)}: <code>{esc(c)}</code></li>" for m, cmds in cmp.commands.items() for c in dict.fromkeys(cmds)
    ) + "".join(f"<li>{esc(m)} notes: {esc(n)}</li>" for m, ns in cmp.notes.items() for n in dict.fromkeys(ns))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>CampusGuard benchmark comparison</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; font-size: 12px; }}
th, td {{ border: 1px solid #ccc; padding: 3px 6px; text-align: right; }}
th {{ background: #f0f0f0; }} td:nth-child(-n+7) {{ text-align: left; }}
tr.skipped td, tr.failed td {{ color: #888; text-align: left; }}
img {{ max-width: 100%; }} code {{ background: #f4f4f4; padding: 1px 3px; }}
</style></head><body>
<h1>CampusGuard benchmark comparison</h1>
<p>Machines: {esc(", ".join(cmp.machines))}. Baseline: <b>{esc(cmp.baseline)}</b> (deltas in brackets are against it,
for the same model, backend, precision and batch).</p>
<h2>Conclusions</h2><ul>{"".join(f"<li>{esc(s)}</li>" for s in sentences)}</ul>
<h2>Matrix</h2><table><tr>{"".join(f"<th>{esc(h)}</th>" for h in head)}</tr>
{"".join(body)}</table>
<h2>Plots</h2>{"".join(images)}
<h2>How these results were made</h2><ul>{commands}</ul>
<p>Sources: {esc(", ".join(cmp.sources))}</p>
</body></html>
"""


def write_report(cmp: Comparison, out_dir: str | Path, repeat_tolerance: float = 0.10) -> dict[str, Path]:
    """Write ``report.md`` (with ``plots/*.png``) and the self-contained ``report.html`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plots = plot_all(cmp, out / "plots")
    sentences = conclusions(cmp, repeat_tolerance=repeat_tolerance)
    md = out / "report.md"
    md.write_text(_markdown(cmp, plots, sentences, out), encoding="utf-8")
    page = out / "report.html"
    page.write_text(_html(cmp, plots, sentences), encoding="utf-8")
    return {"markdown": md, "html": page, **plots}
