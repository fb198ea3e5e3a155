"""Target 4 of issue 24: SIGKILL twice mid-run and a restart give the same incidents, none left open,
no start or end alert sent twice.

On a held-out demo scene (``--seed 10``, 60 s, 640x360, 10 fps, the bundled model unless
``--detector truth``), as an operator would run it, everything on loopback:

1. the **reference**: one uninterrupted `watch` of the file (a subprocess), its incidents;
2. the **crash run** in a fresh folder, with a JSONL sink, a webhook sink (an http.server receiver
   in this process) and an MQTT sink (a private Mosquitto with persistence, and a QoS 1 subscriber
   with a persistent session): `watch` SIGKILLed at ``--kill-at`` fractions of the reference's wall
   time (default 0.35 and 0.7), then started again and run to the end of the file.

Printed and written (``--out``, JSON): incidents in the reference and after the restart, the ones
missing or extra, the ones left open, and per sink the alerts delivered, the (event id, phase)
starts and ends delivered more than once, and the updates delivered more than once. ``--pythonpath``
runs the watch subprocesses on another source tree (the code before the fix, for the comparison).

    python benchmarks/crash_restart.py --seed 10 --seconds 60 --out docs/results/crash-restart.json
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "app"))  # the webhook receiver the tests use
from webhook_receiver import WebhookReceiver  # noqa: E402


# the watch subprocess ------------------------------------------------------------------------
def child(config: str, truth: str | None) -> int:
    """``--child CONFIG``: `campusguard watch CONFIG`, with the ground-truth detector when ``truth`` is given."""
    import numpy as np

    from campusguard.app.config import load_config
    from campusguard.app.service import WatchService
    from campusguard.app.signals import run_until_stopped
    from campusguard.detections import Detections

    factory = None
    if truth is not None:
        frames = json.loads(Path(truth).read_text())["frames"]
        names = {0: "person", 1: "bicycle", 2: "car"}

        class Truth:
            """The scene's ground-truth boxes, frame after frame (no frame is dropped from a file)."""

            def __init__(self) -> None:
                self.names = names
                self.next = 0

            def input_hw(self, frame_hw: tuple[int, int]) -> tuple[int, int]:
                return frame_hw

            def predict_batch(self, images: list[Any]) -> list[Detections]:
                out = []
                for _ in images:
                    objs = frames[self.next]["objects"]
                    self.next += 1
                    time.sleep(0.02)  # about a small model's time per frame here: a run lasts long enough to kill
                    if not objs:
                        out.append(Detections.empty())
                        continue
                    xyxy = np.asarray([o["xyxy"] for o in objs], np.float32)
                    cls = np.asarray([o["class_id"] for o in objs])
                    out.append(Detections(xyxy, np.full(len(objs), 0.9, np.float32), cls))
                return out

        def factory(*a: object) -> Any:
            return Truth()

    service = WatchService(load_config(config), detector_factory=factory)
    return 0 if run_until_stopped(service) else 1


def start_watch(config: Path, truth: Path | None, pythonpath: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, __file__, "--child", str(config)] + (["--truth", str(truth)] if truth else [])
    env = {**os.environ, "PYTHONPATH": pythonpath, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT)


# loopback services ---------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_mosquitto(folder: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "mosquitto.conf"
    conf.write_text(
        f"user {getpass.getuser()}\nlistener {port} 127.0.0.1\nallow_anonymous true\npersistence true\n"
        f"persistence_location {folder}/\nlog_dest file {folder}/log.txt\n"
    )
    exe = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    proc = subprocess.Popen([exe, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, port
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("mosquitto did not start")


def subscribe(port: int) -> tuple[Any, list[dict[str, Any]]]:
    import paho.mqtt.client as mqtt

    got: list[dict[str, Any]] = []
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="cg-crash-bench", clean_session=False)
    ready = threading.Event()
    client.on_connect = lambda c, u, f, rc, p: c.subscribe("campusguard/events", qos=1)
    client.on_subscribe = lambda c, u, mid, rcs, p: ready.set()
    client.on_message = lambda c, u, msg: got.append(json.loads(msg.payload))
    client.connect("127.0.0.1", port, keepalive=10)
    client.loop_start()
    assert ready.wait(10)
    return client, got


# the measurement -----------------------------------------------------------------------------
def incidents(db: Path) -> dict[str, Any]:
    from campusguard.app.events import read_events

    return {e.event_id: e for e in read_events(db)} if db.exists() else {}


def sink_report(deliveries: list[tuple[str, str, Any]]) -> dict[str, Any]:
    """Alerts, starts/ends delivered twice or more, updates delivered twice or more."""
    by_phase = Counter((i, p) for i, p, _ in deliveries if p != "update")
    updates = Counter((i, s) for i, p, s in deliveries if p == "update")
    return {
        "alerts": len(deliveries),
        "starts": sum(p == "start" for _, p, _ in deliveries),
        "updates": sum(p == "update" for _, p, _ in deliveries),
        "ends": sum(p == "end" for _, p, _ in deliveries),
        "start_end_repeated": sum(n - 1 for n in by_phase.values() if n > 1),
        "updates_repeated": sum(n - 1 for n in updates.values() if n > 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--truth", help=argparse.SUPPRESS)
    ap.add_argument("--seed", type=int, default=10, help="a held-out demo seed")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--detector", choices=["model", "truth"], default="model")
    ap.add_argument("--kill-at", default="0.35,0.7", help="fractions of the reference wall time")
    ap.add_argument("--pythonpath", default=str(ROOT / "src"), help="source tree the watch runs on")
    ap.add_argument("--out", type=Path, help="JSON result")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (videos, stores, the MQTT messages)")
    args = ap.parse_args()
    if args.child:
        return child(args.child, args.truth)

    from campusguard.app.demo import demo_config
    from campusguard.data.synth.video import generate_video

    work = Path(tempfile.mkdtemp(prefix="cg-crash-"))
    truth = generate_video(args.seed, work, seconds=args.seconds, name=f"campus-seed{args.seed}")
    video = work / truth.video
    truth_json = video.with_suffix(".json") if args.detector == "truth" else None

    def config(folder: Path, extra_alerts: list[dict[str, Any]]) -> Path:
        folder.mkdir()
        data = demo_config(truth.to_dict(), video, folder)
        data["alerts"] = [{"kind": "jsonl", "path": str(folder / "events.jsonl")}, *extra_alerts]
        path = folder / "watch.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    t0 = time.monotonic()
    ref = start_watch(config(work / "ref", []), truth_json, args.pythonpath)
    _, err = ref.communicate()
    ref_wall = time.monotonic() - t0
    if ref.returncode != 0:
        print(err.decode()[-2000:])
        return 1
    expected = incidents(work / "ref" / "events.db")
    ref_lines = [json.loads(x) for x in (work / "ref" / "events.jsonl").read_text().splitlines()]
    ref_alerts = sink_report([(d["event_id"], d["phase"], d.get("sequence")) for d in ref_lines])

    mosquitto, port = start_mosquitto(work / "mosquitto")
    client, mqtt_events = subscribe(port)
    receiver = WebhookReceiver()
    try:
        cfg = config(
            work / "crash",
            [
                {"kind": "webhook", "url": receiver.url},
                {"kind": "mqtt", "port": port, "reconnect_max_s": 1},
            ],
        )
        kills = []
        for frac in (float(x) for x in args.kill_at.split(",")):
            proc = start_watch(cfg, truth_json, args.pythonpath)
            time.sleep(frac * ref_wall)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            found = incidents(work / "crash" / "events.db")
            kills.append(
                {
                    "at_s": round(frac * ref_wall, 1),
                    "stored": len(found),
                    "open": sum(e.end_s is None for e in found.values()),
                }
            )
        t1 = time.monotonic()
        last = start_watch(cfg, truth_json, args.pythonpath)
        _, err = last.communicate()
        restart_wall = time.monotonic() - t1
        time.sleep(3.0)  # the webhook and MQTT deliveries still in flight
        got = incidents(work / "crash" / "events.db")
        jsonl = [json.loads(x) for x in (work / "crash" / "events.jsonl").read_text().splitlines()]
        types = {"new": "start", "update": "update", "end": "end"}
        sinks = {
            "jsonl": [(d["event_id"], d["phase"], d.get("sequence")) for d in jsonl],
            "webhook": [(d["event_id"], d["phase"], d.get("sequence")) for d in receiver.received],
            "mqtt": [(m["after"]["event_id"], types[m["type"]], m["after"].get("sequence")) for m in mqtt_events],
        }
        result = {
            "command": "python " + " ".join(sys.argv),
            "scene": {"seed": args.seed, "seconds": args.seconds, "detector": args.detector},
            "reference": {"incidents": len(expected), "wall_s": round(ref_wall, 1), "jsonl": ref_alerts},
            "kills": kills,
            "restart": {
                "exit": last.returncode,
                "wall_s": round(restart_wall, 1),
                "incidents": len(got),
                "missing": len(set(expected) - set(got)),
                "extra": len(set(got) - set(expected)),
                "left_open": sum(e.end_s is None for e in got.values()),
                "interrupted": sum(bool(e.details.get("interrupted")) for e in got.values()),
                "same_final_states": all(
                    (got[i].start_s, got[i].end_s) == (e.start_s, e.end_s) for i, e in expected.items() if i in got
                ),
            },
            "sinks": {name: sink_report(d) for name, d in sinks.items()},
        }
    finally:
        client.disconnect()
        client.loop_stop()
        mosquitto.send_signal(signal.SIGTERM)
        mosquitto.wait(10)
        receiver.server.shutdown()
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    (work / "mqtt-events.json").write_text(json.dumps(mqtt_events, indent=1))
    if args.keep:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
