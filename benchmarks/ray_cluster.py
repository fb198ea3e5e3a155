"""`watch` on a local two-node Ray cluster against one process, then with a node killed mid-run.

Eight short synthetic campus cameras (`campusguard.data.synth` videos, each with its scripted
incidents) and the bundled model. Three runs of the real CLI, each a fresh event store:

1. ``single``: ``campusguard watch CONFIG`` (one process, one detector, batches across 8 cameras);
2. ``cluster``: ``campusguard watch CONFIG --ray ADDRESS`` on a head node and a second node
   (Ray's own multi-node cluster on this machine, 127.0.0.1 only, in a private temporary
   folder): two camera groups of four, one per node (``strategy: spread``);
3. ``kill``: the same, with the second node's raylet and workers killed (``allow_graceful=False``)
   once a third of the alerts are out (and ``--kill-after`` of the previous run's time has passed); Ray restarts the group's actor on the head and its file
   cameras re-run from the start.

Events are compared on their deterministic fields (id, camera, phase, stream times, frames,
objects); the JSONL alert sink's lines are counted per (event id, phase) to find duplicates.
Writes ``OUT.md`` and ``OUT.json``.

    python benchmarks/ray_cluster.py --seconds 20 --out docs/results/ray-cluster-cpu

``--batch-size 1`` (default) makes the detector's output independent of which cameras share a
batch, so the comparison tests the distribution, not floating-point batch effects.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault(
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0"
)  # a machine-local cluster on 127.0.0.1 (before Ray's import)

import yaml

MB = 1024 * 1024


def make_config(work: Path, cameras: int, seconds: float, batch_size: int) -> dict[str, Any]:
    """One watch config with ``cameras`` synthetic campus videos (seeds 0..N-1) and the example's rules."""
    from campusguard.app.demo import demo_config
    from campusguard.data.synth.video import generate_video

    cams = []
    data: dict[str, Any] = {}
    for k in range(cameras):
        truth = generate_video(k, work / "videos", seconds=seconds, name=f"cam{k}")
        data = demo_config(truth.to_dict(), work / "videos" / truth.video, work)
        cam = data["cameras"][0]
        cam["id"] = f"cam{k}"
        cams.append(cam)
    data["cameras"] = cams
    data["detector"].update(batch_size=batch_size, threads=1)
    data["outputs"] = {"metrics_interval_s": 0}
    data["cluster"] = {"cameras_per_actor": (cameras + 1) // 2, "num_cpus": 1, "strategy": "spread"}
    return data


def write_run_config(data: dict[str, Any], run_dir: Path) -> Path:
    """The config with this run's own store and JSONL sink."""
    run_dir.mkdir(parents=True, exist_ok=True)
    cfg = {**data, "storage": {"sqlite": str(run_dir / "events.db")}}
    cfg["alerts"] = [{"kind": "jsonl", "path": str(run_dir / "events.jsonl")}]
    path = run_dir / "watch.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def incidents(run_dir: Path) -> list[tuple]:
    from campusguard.app.events import read_events

    return sorted(
        (e.event_id, e.camera_id, e.phase, e.start_s, e.end_s, e.start_frame, e.end_frame, e.tracker_ids)
        for e in read_events(run_dir / "events.db")
    )


def sink_lines(run_dir: Path) -> Counter:
    path = run_dir / "events.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter((d["event_id"], d["phase"]) for d in map(json.loads, lines))


def watch(config: Path, *args: str, on_start: Any = None) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run ``campusguard watch``; ``on_start(proc)`` is called in a thread once it runs. Returns wall seconds."""
    cmd = [sys.executable, "-m", "campusguard.cli.main", "watch", str(config), "--log-level", "info", *args]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if on_start is not None:
        threading.Thread(target=on_start, args=(proc,), daemon=True).start()
    out, err = proc.communicate(timeout=1800)
    return time.perf_counter() - t0, subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def compare(name: str, wall_s: float, run: subprocess.CompletedProcess[str], run_dir: Path, reference: list[tuple]):
    rows = incidents(run_dir)
    lines = sink_lines(run_dir)
    ref_ids = {r[0] for r in reference}
    ids = {r[0] for r in rows}
    return {
        "run": name,
        "exit": run.returncode,
        "wall_s": round(wall_s, 1),
        "incidents": len(rows),
        "identical": rows == reference,
        "lost": len(ref_ids - ids),
        "extra": len(ids - ref_ids),
        "sink_lines": sum(lines.values()),
        "duplicated_sink_lines": sum(n - 1 for n in lines.values()),
        "restarts": run.stderr.count(") restarted (restart"),
        "resent_dropped": int(m.group(1)) if (m := re.search(r"(\d+) re-sent update\(s\) dropped", run.stderr)) else 0,
        "ended_by_driver": run.stderr.count("ending incident"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cameras", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=20.0, help="length of each synthetic video")
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument(
        "--kill-after", type=float, default=0.4, help="kill the node after this fraction of the cluster run"
    )
    ap.add_argument("--out", default="docs/results/ray-cluster-cpu")
    args = ap.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    work = Path(tempfile.mkdtemp(prefix="cgraybench"))
    ray_tmp = tempfile.mkdtemp(prefix="cgray", dir="/tmp")
    os.environ["RAY_TMPDIR"] = ray_tmp  # this cluster only; other Ray sessions on the machine cannot find it
    data = make_config(work, args.cameras, args.seconds, args.batch_size)
    results = []
    cluster = None
    try:
        wall, run = watch(write_run_config(data, work / "single"))
        assert run.returncode == 0, run.stderr[-3000:]
        reference = incidents(work / "single")
        results.append(compare("single process", wall, run, work / "single", reference))

        node_args = {"object_store_memory": 80 * MB}
        cluster = Cluster(
            initialize_head=True,
            head_node_args={
                **node_args,
                "num_cpus": 2,
                "include_dashboard": False,
                "_system_config": {"health_check_period_ms": 500, "health_check_failure_threshold": 3},
            },
        )
        node2 = cluster.add_node(**node_args, num_cpus=1)
        cluster.wait_for_nodes()
        wall, run = watch(write_run_config(data, work / "cluster"), "--ray", cluster.address)
        assert run.returncode == 0, run.stderr[-3000:]
        results.append(compare("2-node cluster", wall, run, work / "cluster", reference))
        placement = [line.split("INFO")[-1].strip() for line in run.stderr.splitlines() if "camera group" in line]
        cluster_wall = wall

        cluster.remove_node(node2)
        node2 = cluster.add_node(**node_args, num_cpus=1)
        cluster.wait_for_nodes()
        killed_at: list[float] = []

        wanted = sum(sink_lines(work / "single").values()) // 3

        def kill_later(proc: subprocess.Popen) -> None:
            """Kill the node once a third of the alerts are out and ``--kill-after`` of the run has passed."""
            time.sleep(args.kill_after * cluster_wall)
            sink = work / "kill" / "events.jsonl"
            while proc.poll() is None and (sink.read_text().count("\n") if sink.exists() else 0) < wanted:
                time.sleep(0.1)
            if proc.poll() is None:
                t = time.perf_counter()
                cluster.remove_node(node2, allow_graceful=False)
                killed_at.append(round(t - started, 1))
                print(f"killed the second node ({time.perf_counter() - t:.1f} s)", file=sys.stderr)

        started = time.perf_counter()
        wall, run = watch(write_run_config(data, work / "kill"), "--ray", cluster.address, on_start=kill_later)
        row = compare("2-node cluster, node killed", wall, run, work / "kill", reference)
        if run.returncode != 0:
            print(run.stderr[-4000:], file=sys.stderr)
        row["killed_at_s"] = killed_at[0] if killed_at else None
        results.append(row)
    finally:
        ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    report(args, results, placement)
    shutil.rmtree(work, ignore_errors=True)


def report(args: argparse.Namespace, results: list[dict[str, Any]], placement: list[str]) -> None:
    from campusguard.doctor import cpu_name

    cpu = cpu_name()
    frames = int(args.cameras * args.seconds * 10)
    head = (
        f"# watch on a local Ray cluster: {args.cameras} synthetic cameras\n\n"
        f"`python benchmarks/ray_cluster.py --cameras {args.cameras} --seconds {args.seconds:g} "
        f"--batch-size {args.batch_size}` on {cpu} ({os.cpu_count()} cores, shared), Ray {__import__('ray').__version__}; "
        f"{frames} frames of 640x360 at 10 fps in all, the bundled model at imgsz 320, one ONNX Runtime thread per "
        "detector. Cluster: a head node (2 CPUs) and a second node (1 CPU) on this machine; two camera groups "
        f"of {(args.cameras + 1) // 2} cameras, one actor each (num_cpus 1, strategy spread).\n\n"
        "| run | exit | wall s | incidents | identical to single | lost | extra | sink lines | duplicated | "
        "actor restarts | re-sent updates dropped | ended by driver | node killed at s |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = "".join(
        f"| {r['run']} | {r['exit']} | {r['wall_s']} | {r['incidents']} | {'yes' if r['identical'] else 'NO'} | "
        f"{r['lost']} | {r['extra']} | {r['sink_lines']} | {r['duplicated_sink_lines']} | {r['restarts']} | "
        f"{r['resent_dropped']} | "
        f"{r['ended_by_driver']} | {r.get('killed_at_s') or ''} |\n"
        for r in results
    )
    notes = (
        "\nIncidents are compared on their deterministic fields (id, camera, phase, stream times, frames, "
        "objects); sink lines are the JSONL alert sink's, counted per (event id, phase). The restarted group's "
        "file cameras re-run from the start: the updates it sends again are dropped by the driver (column "
        "re-sent) and nothing reaches the store or the sinks twice. Wall times include Ray start-up of the "
        "actors and model loading; on 2 shared cores the cluster has no cores to gain, so this is a "
        "correctness run, not a speed-up measurement.\n\nPlacement of the undisturbed cluster run (driver log):\n\n"
        + "".join(f"- {p}\n" for p in placement)
    )
    text = head + rows + notes
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(text, encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps({"cpu": cpu, "results": results}, indent=2) + "\n")
    print(text)


if __name__ == "__main__":
    main()
