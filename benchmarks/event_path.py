"""The event path at many cameras: measured event load per camera, store write rate, and a queue simulation.

Three steps, each printed with where its numbers come from:

1. **Event load per camera** from the demo seeds' ground truth (`SynthVideo(seed).truth()`, the
   scripted 40 s, 640x360, 10 fps scenes that `demo_scores.py` scores): incidents per camera-hour,
   their mean duration, and the store writes they cause. An incident is written once at its start,
   at most once per ``update_interval_s`` while it lasts (the `Episode` default, read from the code)
   and once at its end: ``2 + floor(duration / update_interval_s)`` writes, an upper bound.
2. **Store write rate**: `SQLiteEventStore.record()` (WAL, ``synchronous=FULL``: every write is
   fsync'd when it returns) timed for ``--store-seconds`` on a temporary file here. A rough local
   figure; the store benchmark of issue 12 (docs/results/store-writes-cpu.md) is the reference.
3. **Event hop through Ray** (``--ray-calls N``): calls per second into one Ray actor carrying one
   event each (as JSON), waited one by one and pipelined: the rate one collecting actor or driver
   can take events from camera actors. Local Ray, one CPU.
4. **Simulation**: every camera's writes as a Poisson stream into one FIFO writer with a fixed
   service time (1 / write rate): utilisation, mean and p99 wait, for several camera counts and
   event densities. Lindley's recursion over simulated arrivals, ``--sim-seconds`` of traffic.

    python benchmarks/event_path.py --seeds 0-3 --store-seconds 3 --sim-seconds 600 --ray-calls 2000
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from campusguard.app.events.sqlite import SQLiteEventStore
from campusguard.app.events.types import Event, event_id_for
from campusguard.app.rules.base import Episode
from campusguard.data.synth.video import SynthVideo

UPDATE_INTERVAL_S = float(inspect.signature(Episode.__init__).parameters["update_interval_s"].default)


def parse_seeds(text: str) -> list[int]:
    """``"0-3,7"`` -> ``[0, 1, 2, 3, 7]``."""
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def event_load(seeds: list[int], seconds: float = 40.0, fps: int = 10) -> dict[str, float]:
    """Incidents and store writes per camera-hour in the demo seeds' ground truth (640x360 scenes)."""
    durations: list[float] = []
    writes = 0
    for seed in seeds:
        truth = SynthVideo(seed, (640, 360), seconds, fps).truth()
        for inc in truth.incidents:
            d = max(0.0, float(inc["end_s"]) - float(inc["start_s"]))
            durations.append(d)
            writes += 2 + math.floor(d / UPDATE_INTERVAL_S)
    hours = len(seeds) * seconds / 3600
    return {
        "camera_hours": hours,
        "incidents": len(durations),
        "incidents_per_camera_hour": len(durations) / hours,
        "mean_duration_s": statistics.fmean(durations) if durations else 0.0,
        "writes_per_incident": writes / len(durations) if durations else 0.0,
        "writes_per_camera_hour": writes / hours,
    }


def sample_event(i: int, phase: str = "start") -> Event:
    """A realistic crowd event (three tracks) for the store timing and the size on the wire."""
    start_s = float(i)
    return Event(
        event_id=event_id_for(
            camera_id="cam-0001", rule_name="crowd", zone="plaza", start_frame=i * 10, start_s=start_s
        ),
        phase=phase,  # type: ignore[arg-type]
        camera_id="cam-0001",
        rule_name="crowd",
        rule_kind="crowd",
        zone="plaza",
        start_s=start_s,
        end_s=start_s + 6.0 if phase == "end" else None,
        onset_s=start_s - 1.0,
        start_frame=i * 10,
        tracker_ids=(3, 7, 12),
        class_ids=(0,),
        class_names=("person",),
        count=3,
        details={"dwell_s": 1.0},
    )


def store_write_rate(seconds: float) -> float:
    """Durable `SQLiteEventStore.record` calls per second (start, update, end of successive incidents)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteEventStore(Path(tmp) / "events.db")
        try:
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                for phase in ("start", "update", "end"):
                    store.record(sample_event(n // 3, phase))
                    n += 1
            return n / (time.perf_counter() - t0)
        finally:
            store.close()


def ray_call_rate(calls: int) -> dict[str, float]:
    """Events per second into one Ray actor: each call waited for (``sync``) and all in flight (``pipelined``)."""
    import ray

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:

        @ray.remote(num_cpus=0)
        class Collector:
            def __init__(self) -> None:
                self.n = 0

            def put(self, event_json: str) -> int:
                self.n += 1
                return self.n

        sink = Collector.remote()  # type: ignore[attr-defined]
        payload = json.dumps(sample_event(0, "end").to_dict())
        ray.get(sink.put.remote(payload))
        t0 = time.perf_counter()
        for _ in range(calls // 4):
            ray.get(sink.put.remote(payload))
        sync = (calls // 4) / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        ray.get([sink.put.remote(payload) for _ in range(calls)])
        pipelined = calls / (time.perf_counter() - t0)
        return {"sync_calls_per_s": sync, "pipelined_calls_per_s": pipelined}
    finally:
        ray.shutdown()


def simulate_writer(rate_in: float, rate_out: float, seconds: float, seed: int = 0) -> dict[str, float]:
    """One FIFO writer, Poisson arrivals at ``rate_in``/s, fixed service ``1 / rate_out`` s.

    Returns utilisation and the wait before a write starts (mean, p99, max) in milliseconds; a
    utilisation at or above 1 means the backlog grows without bound (the wait figures then only
    describe the simulated span).
    """
    rng = np.random.default_rng(seed)
    n = rng.poisson(rate_in * seconds)
    arrivals = np.sort(rng.uniform(0.0, seconds, n))
    service = 1.0 / rate_out
    waits = np.empty(n)
    w = 0.0
    for k in range(n):
        if k:
            w = max(0.0, w + service - (arrivals[k] - arrivals[k - 1]))
        waits[k] = w
    return {
        "utilisation": rate_in / rate_out,
        "writes": float(n),
        "wait_mean_ms": float(waits.mean() * 1000) if n else 0.0,
        "wait_p99_ms": float(np.percentile(waits, 99) * 1000) if n else 0.0,
        "wait_max_ms": float(waits.max() * 1000) if n else 0.0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0-3", help="demo seeds whose ground truth gives the event load")
    ap.add_argument("--store-seconds", type=float, default=3.0, help="seconds of SQLite writes to time")
    ap.add_argument("--store-rounds", type=int, default=5, help="rounds of SQLite timing (the disk is shared)")
    ap.add_argument("--store-rate", type=float, default=None, help="writes/s to simulate instead of timing SQLite")
    ap.add_argument("--sim-seconds", type=float, default=600.0, help="simulated seconds of traffic per case")
    ap.add_argument("--cameras", default="100,1000,5000", help="camera counts to simulate")
    ap.add_argument(
        "--quiet-incidents-per-hour",
        type=float,
        default=10.0,
        help="assumed incidents per camera-hour on a real campus",
    )
    ap.add_argument("--ray-calls", type=int, default=0, help="time this many event calls into a Ray actor (0: skip)")
    ap.add_argument("--out", type=Path, default=None, help="JSON file for the numbers")
    args = ap.parse_args()

    load = event_load(parse_seeds(args.seeds))
    size = len(json.dumps(sample_event(0, "end").to_dict()).encode())
    if args.store_rate:
        rates = [args.store_rate]
        src = "given (--store-rate)"
    else:
        rates = [store_write_rate(args.store_seconds) for _ in range(args.store_rounds)]
        src = f"SQLite measured here, {args.store_rounds} rounds of {args.store_seconds:g} s"
    print(
        f"event load (demo seeds {args.seeds} ground truth, {load['camera_hours'] * 3600:.0f} camera-seconds): "
        f"{load['incidents']} incidents, {load['incidents_per_camera_hour']:.0f} per camera-hour, mean "
        f"{load['mean_duration_s']:.1f} s, <= {load['writes_per_incident']:.2f} writes each "
        f"(update_interval_s {UPDATE_INTERVAL_S:g}): {load['writes_per_camera_hour']:.0f} writes per camera-hour"
    )
    print(f"one event as JSON: {size} bytes")
    print(
        f"store: durable writes/s {', '.join(f'{r:.0f}' for r in rates)} ({src}); load average {os.getloadavg()[0]:.1f}"
    )
    ray_rate = ray_call_rate(args.ray_calls) if args.ray_calls else None
    if ray_rate:
        print(
            f"Ray: {ray_rate['sync_calls_per_s']:.0f} event calls/s into one actor waited one by one, "
            f"{ray_rate['pipelined_calls_per_s']:.0f}/s pipelined ({args.ray_calls} calls)"
        )
    cases = {
        "demo density": load["writes_per_camera_hour"],
        f"quiet campus ({args.quiet_incidents_per_hour:g} incidents/camera-hour, assumed)": (
            args.quiet_incidents_per_hour * load["writes_per_incident"]
        ),
    }
    rows = []
    writers = {"slowest": min(rates), "median": statistics.median(rates)}
    for (label, per_hour), (which, rate) in itertools.product(cases.items(), writers.items()):
        print(
            f"{label}, {which} store ({rate:.0f}/s): {0.8 * rate * 3600 / per_hour:,.0f} cameras at 80% of the writer"
        )
        for cams in (int(c) for c in args.cameras.split(",")):
            rate_in = cams * per_hour / 3600
            sim = simulate_writer(rate_in, rate, args.sim_seconds)
            row = {"case": label, "store": which, "store_writes_per_s": rate, "cameras": cams, "writes_per_s": rate_in}
            rows.append({**row, "bytes_per_s": rate_in * size, **sim})
            print(
                f"{label}, {which} store ({rate:.0f}/s), {cams} cameras: {rate_in:.1f} writes/s, {rate_in * size / 1e3:.1f} kB/s, utilisation "
                f"{sim['utilisation']:.2f}, wait mean {sim['wait_mean_ms']:.1f} ms, p99 {sim['wait_p99_ms']:.1f} ms, "
                f"max {sim['wait_max_ms']:.0f} ms"
            )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "load": load,
            "event_bytes": size,
            "store_writes_per_s": rates,
            "store_rate_source": src,
            "ray": ray_rate,
            "cases": rows,
        }
        args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
