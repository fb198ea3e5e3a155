"""A/B of `campusguard watch` between two source trees on one config: CPU seconds, wall seconds, alerts.

Run each tree (its ``src`` folder put first on PYTHONPATH) in the order given, each with a fresh
output folder, and print one JSON line per run; CPU seconds are the child's user + system time
from `getrusage`, which a busy machine inflates less than wall time. Example (docs/results/redesign-ab.md)::

    python benchmarks/ab_watch.py --config DEMO/seed0/watch.yaml --tree before=../old/src --tree after=src \
        --order before,after,after,before
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, required=True, help="a watch config (e.g. written by campusguard demo)")
    ap.add_argument("--tree", action="append", required=True, help="NAME=SRC_FOLDER (twice or more)")
    ap.add_argument("--order", required=True, help="names in run order, e.g. a,b,b,a")
    ap.add_argument("--out", type=Path, default=None, help="where the runs' folders go (default: a temporary one)")
    args = ap.parse_args()
    trees = dict(t.split("=", 1) for t in args.tree)
    text = args.config.read_text()
    data_dir = str(args.config.parent)
    out = args.out or Path(tempfile.mkdtemp(prefix="ab-watch-"))
    for i, name in enumerate(args.order.split(",")):
        run = out / f"run{i}-{name}"
        shutil.rmtree(run, ignore_errors=True)
        run.mkdir(parents=True)
        # outputs (store, alerts, media) into the run's folder; the video stays where it is
        lines = [ln if "source:" in ln else ln.replace(data_dir, str(run)) for ln in text.splitlines()]
        (run / "watch.yaml").write_text("\n".join(lines) + "\n")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "campusguard.cli.main", "watch", str(run / "watch.yaml")],
            env={**os.environ, "PYTHONPATH": str(Path(trees[name]).resolve())},
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        jsonl = run / "events.jsonl"
        alerts = len(jsonl.read_text().splitlines()) if jsonl.exists() else None
        print(
            json.dumps(
                {
                    "tree": name,
                    "rc": proc.returncode,
                    "cpu_s": round(cpu, 2),
                    "wall_s": round(wall, 2),
                    "alerts": alerts,
                }
            ),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
