"""How long the console takes to check and save many big shapes (issue 32: 63 zones and 32 privacy
masks of 256 points, about 360 KB of JSON, took 125 s and held every other save for 39 s).

Three measurements, each printed with its ratio to the code it replaced:
  1. the polygon check (`polygon_problem`) of 100 polygons of 256 points, against the pair loop in
     Python it replaced (kept below as `_pair_loop_self_intersection`, the same answers);
  2. the zones-inside-masks check (`CameraConfig.privacy_errors`) of the 63 zones against the 32
     masks, against one `shape_inside_polygon` per pair with the hand-written segment loop;
  3. the whole save through a real uvicorn (GET for the ETag, then PUT with If-Match), and how long a
     small save from another admin, sent while the big one runs, waits;
  4. the same save to a console whose camera is running (a `serve` runtime with one file camera
     looping at its real frame rate, the fake blob detector), where the save is also applied to the
     running pipeline (zones, rules, masks built for its frame) and the pipeline then draws and
     masks the 63 + 32 shapes on every frame. ``--before REV`` runs this one with the sources of
     git revision ``REV`` too (in a child process each, one after the other) and prints the two
     side by side.

On a shared machine the wall times include waiting for the CPU: the CPU seconds of this process
(client, server and the concurrent small save together) are printed beside them, and ``uptime``'s
load average says how shared it was.

Run from the repository root (a checkout, with the console extra):
    PYTHONPATH=src python benchmarks/zone_save.py [--rounds 3] [--before REV] [--only running] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "app" / "console"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "app"))

from fakes_console import console_yaml, make_console, many_shapes_body, start_server, stop_server  # noqa: E402
from fakes_watch import write_scene  # noqa: E402

from campusguard.app.config import CameraConfig  # noqa: E402
from campusguard.zones import polygon_problem  # noqa: E402
from campusguard.zones.polygon import _polygon_problem, _self_intersection, points_in_polygon  # noqa: E402

# the code the checks replaced, as it was (pair loops in Python), for the ratios ------------------------


def _orient(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> float:
    return float((b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]))


def _proper(d1: float, d2: float, d3: float, d4: float) -> bool:
    return ((d1 > 0 > d2) or (d1 < 0 < d2)) and ((d3 > 0 > d4) or (d3 < 0 < d4))


def _segments_intersect(p1: np.ndarray, p2: np.ndarray, q1: np.ndarray, q2: np.ndarray) -> bool:
    def on_segment(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> bool:
        return bool(min(a[0], b[0]) <= c[0] <= max(a[0], b[0]) and min(a[1], b[1]) <= c[1] <= max(a[1], b[1]))

    d1, d2 = _orient(q1, q2, p1), _orient(q1, q2, p2)
    d3, d4 = _orient(p1, p2, q1), _orient(p1, p2, q2)
    if _proper(d1, d2, d3, d4):
        return True
    return (
        (d1 == 0 and on_segment(q1, q2, p1))
        or (d2 == 0 and on_segment(q1, q2, p2))
        or (d3 == 0 and on_segment(p1, p2, q1))
        or (d4 == 0 and on_segment(p1, p2, q2))
    )


def _pair_loop_self_intersection(poly: np.ndarray) -> tuple[int, int] | None:
    k = len(poly)
    edges = [(poly[i], poly[(i + 1) % k]) for i in range(k)]
    for i in range(k):
        for j in range(i + 1, k):
            if j == i + 1 or (i == 0 and j == k - 1):
                continue
            if _segments_intersect(*edges[i], *edges[j]):
                return i, j
    return None


def _pair_loop_inside(points: np.ndarray, poly: np.ndarray, closed: bool) -> bool:
    if len(points) == 0 or not bool(np.all(points_in_polygon(points, poly))):
        return False
    n = len(points) if closed else len(points) - 1
    for i in range(n):
        a, b = points[i], points[(i + 1) % len(points)]
        for j in range(len(poly)):
            q1, q2 = poly[j], poly[(j + 1) % len(poly)]
            if _proper(_orient(q1, q2, a), _orient(q1, q2, b), _orient(a, b, q1), _orient(a, b, q2)):
                return False
        if not bool(points_in_polygon(((a + b) / 2)[None], poly)[0]):
            return False
    return True


# measurements ---------------------------------------------------------------------------------------


def _best(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def bench_polygons(rounds: int) -> None:
    body = many_shapes_body((1920, 1080), zones=63, masks=37)  # 100 polygons of 256 points
    polygons = [np.asarray(s["polygon"], np.float64) for s in body["zones"] + body["privacy"]["masks"]]
    assert all(_self_intersection(p) == _pair_loop_self_intersection(p) for p in polygons[:5])

    def check() -> None:
        _polygon_problem.cache_clear()  # the check itself, not its remembered answers
        for p in polygons:
            polygon_problem(p)

    new = _best(check, rounds)
    old = _best(lambda: [_pair_loop_self_intersection(p) for p in polygons], 1)
    print(
        f"polygon check, 100 polygons x 256 points: {new * 1000:.1f} ms (pair loop: {old:.2f} s), {old / new:.0f}x faster"
    )


def bench_masks(rounds: int) -> None:
    body = many_shapes_body((1920, 1080))
    cam = CameraConfig.model_validate({"id": "c", "source": "x.mp4", **body})
    new = _best(lambda: cam.privacy_errors((1920, 1080)), rounds)
    zones = [np.asarray(z.polygon, np.float64) for z in cam.zones]
    masks = [np.asarray(m.polygon, np.float64) for m in cam.privacy.masks]
    old = _best(lambda: [_pair_loop_inside(z, m, True) for z in zones for m in masks], 1)
    print(
        f"zones inside masks, 63 x 32 of 256 points: {new * 1000:.1f} ms (pair loops: {old * 1000:.0f} ms), "
        f"{old / new:.1f}x faster"
    )


def bench_save(rounds: int) -> None:
    import json

    import httpx

    tmp = Path(tempfile.mkdtemp(prefix="zone-save-"))
    video = write_scene(tmp / "scene.mp4")
    config = tmp / "watch.yaml"
    config.write_text(console_yaml(video, tmp))
    console = make_console(config, tmp)
    console.users.add_user("adele", "admin", "admin-pass-2")
    live = start_server(console)
    big = many_shapes_body((320, 180))
    print(
        f"the save: {len(json.dumps(big)) / 1000:.0f} KB of JSON ({len(big['zones'])} zones, {len(big['privacy']['masks'])} masks)"
    )
    try:
        with httpx.Client(base_url=live.url, headers=console.bearer("ada"), timeout=300) as ada:
            totals, waits, cpus = [], [], []
            for i in range(rounds):
                big["privacy"]["masks"][0]["polygon"][0][0] += 0.1  # each round a change (a no-op writes nothing)
                small_wait: list[float] = []

                def small_save(small_wait: list[float] = small_wait) -> None:
                    with httpx.Client(base_url=live.url, headers=console.bearer("adele"), timeout=300) as adele:
                        got = adele.get("/api/v1/cameras/cam1/zones")
                        t = time.perf_counter()
                        adele.put("/api/v1/cameras/cam1/zones", json=got.json(), headers={"If-Match": "*"})
                        small_wait.append(time.perf_counter() - t)

                t0, c0 = time.perf_counter(), time.process_time()
                etag = ada.get("/api/v1/cameras/cam1/zones").headers["etag"]
                other = threading.Timer(0.05, small_save)
                other.start()
                r = ada.put("/api/v1/cameras/cam1/zones", json=big, headers={"If-Match": etag})
                totals.append(time.perf_counter() - t0)
                other.join()
                if r.status_code == 409:  # the small save went first: the big one is told, as it should be
                    etag = r.headers["etag"]
                    t0 = time.perf_counter()
                    r = ada.put("/api/v1/cameras/cam1/zones", json=big, headers={"If-Match": etag})
                    totals[-1] = time.perf_counter() - t0
                assert r.status_code == 200, r.text
                cpus.append(time.process_time() - c0)  # this process: client, server and the small save
                waits.append(small_wait[0])
                print(
                    f"  round {i + 1}: GET + PUT {totals[-1]:.2f} s wall, {cpus[-1]:.2f} s CPU of client and server; "
                    f"a small save meanwhile took {waits[-1]:.2f} s"
                )
            print(
                f"the 63 + 32 shape save end to end: median {statistics.median(totals):.2f} s wall "
                f"({statistics.median(cpus):.2f} s CPU) "
                f"(issue 32 measured 125 s: {125 / statistics.median(totals):.0f}x); "
                f"another admin's save meanwhile: median {statistics.median(waits):.2f} s (was held 39 s)"
            )
    finally:
        stop_server(live)
        console.runtime.stop()
        console.users.close()


def running_save(rounds: int) -> dict[str, object]:
    """Save the big body ``rounds`` times to a console whose camera runs (GET for the ETag, then PUT):
    the first save replaces the scene's 2 zones by the 63 + 32 shapes, each later one moves one point
    of a mask (what an editor sends: every shape, a few changed). Seconds of wall and of this
    process's CPU per save, and the camera's frames processed meanwhile (it kept running)."""
    import httpx

    tmp = Path(tempfile.mkdtemp(prefix="zone-save-running-"))
    video = write_scene(tmp / "scene.mp4")
    config = tmp / "watch.yaml"
    config.write_text(console_yaml(video, tmp, live=True))  # realtime and looping: a camera that never ends
    console = make_console(config, tmp, start=True)
    live = start_server(console)
    big = many_shapes_body((320, 180))
    walls: list[float] = []
    cpus: list[float] = []
    try:
        service = console.runtime.service
        deadline = time.monotonic() + 60
        while service is None or "cam1" not in service.analytics:  # the camera's first frame came
            if time.monotonic() > deadline:
                raise RuntimeError("the camera did not start")
            time.sleep(0.05)
            service = console.runtime.service
        time.sleep(1.0)
        with httpx.Client(base_url=live.url, headers=console.bearer("ada"), timeout=300) as ada:
            for _ in range(rounds):
                t0, c0 = time.perf_counter(), time.process_time()
                etag = ada.get("/api/v1/cameras/cam1/zones").headers["etag"]
                r = ada.put("/api/v1/cameras/cam1/zones", json=big, headers={"If-Match": etag})
                walls.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
                assert r.status_code == 200, r.text
                big["privacy"]["masks"][0]["polygon"][0][0] += 0.1  # the next save changes one point
                time.sleep(1.0)  # the pipeline runs with the new shapes between saves
        running = console.runtime.camera_status()[0].state
    finally:
        stop_server(live)
        console.runtime.stop()
        console.users.close()
    return {"walls_s": walls, "cpus_s": cpus, "camera": running, "kb": round(len(json.dumps(big)) / 1000)}


def _run_child(src: Path, rounds: int) -> dict[str, object]:
    """`running_save` in a child process on the sources ``src``."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        env = {**os.environ, "PYTHONPATH": str(src)}
        cmd = [sys.executable, __file__, "--child", "--rounds", str(rounds), "--json", out.name]
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        result: dict[str, object] = json.loads(Path(out.name).read_text())
        return result


def _sources_at(rev: str) -> Path:
    """The ``src`` tree of git revision ``rev``, extracted to a temporary folder."""
    root = Path(__file__).resolve().parents[1]
    dest = Path(tempfile.mkdtemp(prefix="zone-save-before-"))
    archive = subprocess.run(["git", "-C", str(root), "archive", rev, "src"], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest / "src"


def _load() -> str:
    """``uptime``'s load average (1, 5, 15 minutes): how shared the machine was."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def bench_running(rounds: int, before: str | None) -> dict[str, object]:
    here = Path(__file__).resolve().parents[1] / "src"
    runs: dict[str, object] = {"load_before": _load()}
    if before is not None:
        runs[f"before ({before})"] = _run_child(_sources_at(before), rounds)
    runs["now"] = _run_child(here, rounds)
    runs["load_after"] = _load()
    print(f"the save to a console whose camera is running, {rounds} saves each (load average {runs['load_before']}):")
    print(f"  {'':>22} {'first save':>12} {'later saves (median)':>22} {'CPU, first / later':>22}")
    for name, run in runs.items():
        if not isinstance(run, dict):
            continue
        walls, cpus = run["walls_s"], run["cpus_s"]
        later = statistics.median(walls[1:]) if len(walls) > 1 else float("nan")
        later_cpu = statistics.median(cpus[1:]) if len(cpus) > 1 else float("nan")
        print(f"  {name:>22} {walls[0]:>10.2f} s {later:>20.2f} s {cpus[0]:>10.2f} / {later_cpu:.2f} s")
    print(f"  (load average after: {runs['load_after']})")
    return runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds of each measurement (the best or median is shown)")
    ap.add_argument("--only", choices=["running"], help="only the save to a console whose camera runs")
    ap.add_argument("--before", metavar="REV", help="also run the running-camera save on git revision REV's sources")
    ap.add_argument("--json", metavar="FILE", help="write the running-camera save's numbers to FILE")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)  # one run of `bench_running`
    args = ap.parse_args(argv)
    if args.child:
        Path(args.json).write_text(json.dumps(running_save(args.rounds)))
        return 0
    if args.only is None:
        bench_polygons(args.rounds)
        bench_masks(args.rounds)
        bench_save(args.rounds)
    runs = bench_running(args.rounds, args.before)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
