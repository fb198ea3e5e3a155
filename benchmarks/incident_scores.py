"""Incident scores over several synthetic scenarios: seed lists, one row per scenario, pooled counts.

Shared by demo_scores.py, fall_scores.py and families_compare.py (benchmarks/ is on the path
when they run as scripts). Precision, recall and F1 come from `campusguard.app.eval_events`, the
code that scores a single scenario, so a pooled F1 is computed exactly as a per-scenario one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from campusguard.app.eval_events import EventScores, precision_recall_f1

__all__ = ["GROUPS", "demo_row", "fall_row", "parse_seeds", "pooled", "seed_groups"]

GROUPS = ("demo", "held-out")
"""Seeds the example config was checked on, and seeds never looked at while tuning."""


def parse_seeds(text: str) -> list[int]:
    """``"0-3,7"`` -> ``[0, 1, 2, 3, 7]``; ``""`` -> ``[]``."""
    out: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi or lo)
        except ValueError:
            raise SystemExit(f"bad seed list {text!r}: use numbers and ranges such as 0-3,7") from None
        if last < first:
            raise SystemExit(f"bad seed range {part!r} in {text!r}: the end is before the start")
        out.extend(range(first, last + 1))
    return out


def seed_groups(demo: str, held_out: str) -> list[tuple[str, list[int]]]:
    """``[("demo", seeds), ("held-out", seeds)]`` from the two seed lists; a group with no seeds is left out."""
    return [(g, seeds) for g, seeds in zip(GROUPS, (parse_seeds(demo), parse_seeds(held_out)), strict=True) if seeds]


def demo_row(group: str, seed: int, scores: EventScores, seconds: float) -> dict[str, Any]:
    """One scenario's overall counts and scores, and its missed and spurious incidents as ``kind@start``."""
    o = scores.overall
    return {
        "group": group,
        "seed": seed,
        "tp": o.tp,
        "fp": o.fp,
        "fn": o.fn,
        "precision": o.precision,
        "recall": o.recall,
        "f1": o.f1,
        "missed": [f"{i.kind}@{i.start_s:.1f}" for i in scores.false_negatives],
        "spurious": [f"{i.kind}@{i.start_s:.1f}" for i in scores.false_positives],
        "seconds": round(seconds, 1),
    }


def fall_row(group: str, seed: int, scores: EventScores, seconds: float) -> dict[str, Any]:
    """One scenario's counts of the fall rule (``fall_tp`` ...) and of every kind (``all_tp`` ...)."""
    fall = scores.per_kind.get("fall")
    tp, fp, fn = (fall.tp, fall.fp, fall.fn) if fall is not None else (0, 0, 0)
    o = scores.overall
    return {
        "group": group,
        "seed": seed,
        "fall_tp": tp,
        "fall_fp": fp,
        "fall_fn": fn,
        "all_tp": o.tp,
        "all_fp": o.fp,
        "all_fn": o.fn,
        "seconds": round(seconds, 1),
    }


def pooled(rows: Sequence[Mapping[str, Any]], prefix: str = "") -> dict[str, Any]:
    """Counts ``{prefix}tp``, ``{prefix}fp``, ``{prefix}fn`` summed over ``rows``, the precision, recall
    and F1 of the sums, and the mean and minimum of the per-row F1.

    Raises:
        ValueError: ``rows`` is empty (a group without scenarios has no scores).
    """
    if not rows:
        raise ValueError("no rows to pool")
    counts = [tuple(int(r[f"{prefix}{k}"]) for k in ("tp", "fp", "fn")) for r in rows]
    tp, fp, fn = (sum(c[i] for c in counts) for i in range(3))
    p, rc, f1 = precision_recall_f1(tp, fp, fn)
    per_row = [precision_recall_f1(*c)[2] for c in counts]
    return {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "precision": p,
        "recall": rc,
        "f1": f1,
        "mean_f1": sum(per_row) / len(per_row),
        "min_f1": min(per_row),
    }
