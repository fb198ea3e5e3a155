"""Agreement of two runs of the same bench matrix (run-to-run repeatability) as a Markdown table.

Usage: python benchmarks/run_to_run.py FIRST.json SECOND.json [--tolerance 0.10]
"""

from __future__ import annotations

import argparse
import sys

from campusguard.bench.compare import run_to_run
from campusguard.bench.results import load_result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("first")
    ap.add_argument("second")
    ap.add_argument("--tolerance", type=float, default=0.10)
    args = ap.parse_args(argv)
    rows = run_to_run(load_result(args.first), load_result(args.second), args.tolerance)
    print("| combination | p50 run 1 (ms) | p50 run 2 (ms) | spread | within tolerance |")
    print("|---|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['label']} | {r['p50_first_ms']:.1f} | {r['p50_second_ms']:.1f} | {r['spread']:.1%} | {'yes' if r['agree'] else 'no'} |"
        )
    agree = sum(r["agree"] for r in rows)
    print(f"\n{agree} of {len(rows)} combinations agree within {args.tolerance:.0%} on the median.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
