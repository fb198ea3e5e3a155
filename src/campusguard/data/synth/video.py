"""Scripted campus videos from one fixed camera, with tracked ground truth and incidents.

The camera is `Camera.for_frame` (the same model as the still images, so objects have the same
pixel sizes). The campus, in world metres (x right, z depth): a road across the view
(z 16..22) with sidewalks on both sides, a marked fire lane at the near curb, a fenced
restricted yard on the right (fence line along x = 3), a construction (danger) area on the
left, a small plaza with a bench (loiter area) in the middle foreground, buildings behind.

Background traffic (walkers on the sidewalks, vehicles on the road, parked bicycles) never
enters the zones. Scripted incidents, chosen from the seed and kept apart in time: a group
gathering in the danger area (crowd), a vehicle stopping in the fire lane, a person climbing
into the restricted yard (intrusion and a line crossing) and a person lingering on the plaza
(loitering). Even seeds get all four kinds. The incidents in the truth are computed from the
rendered boxes (`incidents.compute_incidents`), not copied from the script.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np

from campusguard.data.synth.camera import Camera
from campusguard.data.synth.campus import (
    FAR_LANE_Z,
    FAR_WALK_Z,
    FENCE_LINE_XZ,
    NEAR_LANE_Z,
    NEAR_WALK_Z,
    ZONES_XZ,
    campus_layout,
)
from campusguard.data.synth.classes import BICYCLE, BUS, CAR, MOTORCYCLE, PERSON, TRUCK
from campusguard.data.synth.incidents import RuleParams, compute_incidents, side_of_line
from campusguard.data.synth.lighting import LIGHTINGS, Lighting
from campusguard.data.synth.render import NoiseBank, Placed, compose
from campusguard.data.synth.scene import render_background
from campusguard.data.synth.sprites import Look, draw_object, draw_rider, lying, random_look
from campusguard.data.synth.view_effects import ViewEffect, apply_view_effects, frozen_source_index, health_truth
from campusguard.errors import InvalidInputError
from campusguard.io.video_writer import H264Writer

__all__ = [
    "VideoTruth",
    "SynthVideo",
    "iter_video_frames",
    "video_truth",
    "generate_video",
    "load_video_truth",
    "SCHEMA",
    "ZONES_XZ",
    "FENCE_LINE_XZ",
]

SCHEMA = "campusguard.synth.video/1"

_GAP_S = 2.5  # minimum time between two scripted incidents
_VIDEO_MIN_VISIBLE = 0.25  # lower than for stills: people passing behind each other should not blink out
_FIRST_INCIDENT_S = 3.0  # earliest start of the first incident


# -- actors ------------------------------------------------------------------------------
@dataclass
class Actor:
    """One tracked object moving along piecewise-linear keyframes ``(t, x, z)``."""

    track_id: int
    class_id: int
    look: Look
    keys: list[tuple[float, float, float]] = field(default_factory=list)
    stride_m: float = 1.4
    rider: tuple[int, Look] | None = None  # (track id, look) of a person riding this bicycle/motorcycle
    down: tuple[float, float] | None = None  # [fall, get-up) seconds during which this person lies on the ground

    def is_down(self, t: float) -> bool:
        return self.down is not None and self.down[0] <= t < self.down[1]

    def start(self, t: float, x: float, z: float) -> Actor:
        self.keys = [(t, x, z)]
        return self

    def to(self, x: float, z: float, speed: float) -> Actor:
        t0, x0, z0 = self.keys[-1]
        self.keys.append((t0 + float(np.hypot(x - x0, z - z0)) / speed, x, z))
        return self

    def wait(self, seconds: float) -> Actor:
        t0, x0, z0 = self.keys[-1]
        self.keys.append((t0 + seconds, x0, z0))
        return self

    @property
    def t_start(self) -> float:
        return self.keys[0][0]

    @property
    def t_end(self) -> float:
        return self.keys[-1][0]

    def time_at(self, x_or_z: str, value: float) -> float:
        """First time the actor's ``x`` or ``z`` reaches ``value`` (inf if never)."""
        k = 1 if x_or_z == "x" else 2
        for a, b in zip(self.keys[:-1], self.keys[1:], strict=True):
            if (a[k] - value) * (b[k] - value) <= 0 and a[k] != b[k]:
                return a[0] + (value - a[k]) / (b[k] - a[k]) * (b[0] - a[0])
        return float("inf")

    def state(self, t: float) -> tuple[float, float, float, float, float] | None:
        """``(x, z, vx, vz, distance_walked)`` at time ``t``, or ``None`` when absent."""
        if t < self.t_start or t > self.t_end:
            return None
        dist = 0.0
        for a, b in zip(self.keys[:-1], self.keys[1:], strict=True):
            seg = float(np.hypot(b[1] - a[1], b[2] - a[2]))
            if t <= b[0]:
                f = 0.0 if b[0] == a[0] else (t - a[0]) / (b[0] - a[0])
                dt = max(b[0] - a[0], 1e-9)
                return (
                    a[1] + f * (b[1] - a[1]),
                    a[2] + f * (b[2] - a[2]),
                    (b[1] - a[1]) / dt,
                    (b[2] - a[2]) / dt,
                    dist + f * seg,
                )
            dist += seg
        _, x, z = self.keys[-1]
        return (x, z, 0.0, 0.0, dist)

    def view(self, t: float) -> str:
        """Facing: from the current segment's motion, else the last moving segment, else ``front``."""
        seg = next((j for j in range(1, len(self.keys)) if self.keys[j][0] >= t), len(self.keys) - 1)
        for j in range(seg, 0, -1):
            p, q = self.keys[j - 1], self.keys[j]
            dx, dz = q[1] - p[1], q[2] - p[2]
            if abs(dx) + abs(dz) > 1e-6:
                if abs(dx) >= 0.7 * abs(dz):
                    return "right" if dx > 0 else "left"
                return "back" if dz > 0 else "front"
        return "front"


@dataclass(frozen=True)
class _Script:
    kind: str
    actors: list[Actor]
    window: tuple[float, float]  # nominal incident window, absolute seconds


# -- scene --------------------------------------------------------------------------------
def _clip_to_frame(poly_uv: np.ndarray, width: int, height: int) -> np.ndarray:
    frame = np.array([[0, 0], [width, 0], [width, height], [0, height]], np.float32)
    area, inter = cv2.intersectConvexConvex(poly_uv.astype(np.float32), frame)
    if inter is None or area <= 0:
        return np.zeros((0, 2))
    return np.round(inter.reshape(-1, 2).astype(np.float64), 1)


# -- scripts ------------------------------------------------------------------------------
class _Ids:
    def __init__(self) -> None:
        self.next = 1

    def __call__(self) -> int:
        self.next += 1
        return self.next - 1


def _person(rng: np.random.Generator, ids: _Ids) -> Actor:
    return Actor(ids(), PERSON, random_look(rng, PERSON))


def _crowd(rng: np.random.Generator, cam: Camera, t0: float, ids: _Ids) -> _Script:
    n = int(rng.integers(3, 6))
    xs = np.linspace(-4.0, -1.5, n) + rng.uniform(-0.15, 0.15, n)
    zs = rng.uniform(9.0, 11.0, n)
    actors, arrivals = [], []
    stay_until = t0 + 4.5 + 0.5 * n + float(rng.uniform(3.5, 5.0))
    for i in range(n):
        a = _person(rng, ids)
        speed = float(rng.uniform(1.1, 1.5))
        if i % 2 == 0:
            z_in = float(rng.uniform(8.8, 11.2))
            a.start(t0 + 0.6 * i, -cam.half_width_m(z_in) - 1.0, z_in)
        else:
            a.start(t0 + 0.6 * i, float(rng.uniform(-3.5, -1.5)), cam.near_depth_m - 0.9)
        a.to(float(xs[i]), float(zs[i]), speed)
        arrivals.append(a.t_end)
        a.wait(max(0.5, stay_until + 0.3 * i - a.t_end))
        z_out = float(rng.uniform(8.8, 11.2))
        a.to(-cam.half_width_m(z_out) - 1.0, z_out, speed)
        actors.append(a)
    third = sorted(arrivals)[2]
    leave = sorted(a.keys[-2][0] for a in actors)[-3]
    return _Script("crowd", actors, (third + 3.0, leave))


def _fire_lane(rng: np.random.Generator, cam: Camera, t0: float, ids: _Ids) -> _Script:
    cls = CAR if rng.random() < 0.7 else TRUCK
    a = Actor(ids(), cls, random_look(rng, cls))
    x_stop = float(rng.uniform(-7.5, -5.5))
    a.start(t0, -cam.half_width_m(NEAR_LANE_Z) - 6.0, NEAR_LANE_Z)
    a.to(x_stop - 2.5, NEAR_LANE_Z, float(rng.uniform(6, 8)))
    a.to(x_stop, NEAR_LANE_Z, 1.6)
    stopped = a.t_end
    a.wait(float(rng.uniform(7.0, 9.0)))
    a.to(x_stop + 3.0, NEAR_LANE_Z, 2.0)
    a.to(cam.half_width_m(NEAR_LANE_Z) + 8.0, NEAR_LANE_Z, 7.0)
    return _Script("fire_lane", [a], (stopped + 5.0, a.keys[-3][0]))


def _intrusion(rng: np.random.Generator, cam: Camera, t0: float, ids: _Ids) -> _Script:
    a = _person(rng, ids)
    speed = float(rng.uniform(1.3, 1.6))
    x_walk = float(rng.uniform(2.5, 2.7))  # between the plaza (x <= 2.2) and the fence (x = 3)
    a.start(t0, x_walk, cam.near_depth_m - 0.9)
    a.to(x_walk, 11.8, speed)
    inside = (float(rng.uniform(4.8, 6.0)), float(rng.uniform(9.5, 11.0)))
    a.to(*inside, speed)
    enter = a.time_at("x", 3.0)
    a.wait(float(rng.uniform(1.5, 2.5)))
    a.to(x_walk, 11.8, speed)
    leave = a.keys[-2][0] + (a.t_end - a.keys[-2][0]) * 0.5
    z_walk = float(rng.uniform(*NEAR_WALK_Z))
    a.to(1.2, z_walk, speed).to(-cam.half_width_m(z_walk) - 1.0, z_walk, speed)
    return _Script("intrusion", [a], (enter, leave))


def _loitering(rng: np.random.Generator, cam: Camera, t0: float, ids: _Ids) -> _Script:
    a = _person(rng, ids)
    x0 = float(rng.uniform(0.3, 1.6))
    a.start(t0, x0, cam.near_depth_m - 0.9)
    a.to(x0, 8.2, 1.2)
    enter = a.time_at("z", 7.0)
    for _ in range(3):
        a.wait(float(rng.uniform(0.8, 1.6)))
        a.to(float(rng.uniform(0.1, 1.9)), float(rng.uniform(7.6, 10.0)), 0.7)
    a.wait(max(0.5, enter + 11.5 - a.t_end))
    leave = a.t_end
    a.to(float(rng.uniform(0.3, 1.6)), cam.near_depth_m - 0.9, 1.2)
    return _Script("loitering", [a], (enter + 8.0, leave))


_SCRIPTS = {"crowd": _crowd, "fire_lane": _fire_lane, "intrusion": _intrusion, "loitering": _loitering}


def _fall(rng: np.random.Generator, cam: Camera, t0: float, ids: _Ids) -> _Script:
    """A person walks off the near sidewalk, falls in the open strip between the zones and the
    sidewalk (no zone), lies still, gets up and walks away (only with ``falls=True``)."""
    a = _person(rng, ids)
    speed = float(rng.uniform(1.1, 1.5))
    z_walk = float(rng.uniform(*NEAR_WALK_Z))
    d = 1 if rng.random() < 0.5 else -1
    spot = (float(rng.uniform(-2.5, 1.5)), float(rng.uniform(12.2, 13.4)))
    a.start(t0, -d * (cam.half_width_m(z_walk) + 1.0), z_walk).to(spot[0] - d * 1.5, z_walk, speed).to(*spot, speed)
    fell = a.t_end + float(rng.uniform(0.0, 0.6))
    a.wait(fell - a.t_end + float(rng.uniform(6.0, 9.0)))
    a.down = (fell, a.t_end)
    a.wait(float(rng.uniform(0.8, 1.5)))  # stands a moment after getting up
    a.to(d * (cam.half_width_m(z_walk) + 1.0), z_walk, speed)
    return _Script("fall", [a], (fell, a.down[1]))


def _shift(script: _Script, dt: float) -> _Script:
    for a in script.actors:
        a.keys = [(t + dt, x, z) for t, x, z in a.keys]
        if a.down is not None:
            a.down = (a.down[0] + dt, a.down[1] + dt)
    return _Script(script.kind, script.actors, (script.window[0] + dt, script.window[1] + dt))


def _simulated_window(
    script: _Script,
    cam: Camera,
    zones: dict[str, np.ndarray],
    fence: tuple[np.ndarray, np.ndarray, str],
    fps: int,
    rules: RuleParams,
) -> tuple[float, float] | None:
    """Span of the incidents the script's actors alone trigger, from their projected ground points."""
    t_start, t_end = max(0.0, min(a.t_start for a in script.actors)), max(a.t_end for a in script.actors)
    frames = []
    for i in range(int(t_start * fps), max(0, int(t_end * fps) + 2)):
        objs = []
        for a in script.actors:
            st = a.state(i / fps)
            if st is not None and st[1] > 1.0:
                u, v = cam.project(np.array([[st[0], st[1]]]))[0]
                v = min(v, cam.height)  # boxes are clipped to the frame
                box = [u - 20, v - 4, u + 20, v] if a.is_down(i / fps) else [u - 2, v - 20, u + 2, v]
                objs.append({"track_id": a.track_id, "class_id": a.class_id, "xyxy": box})
        frames.append({"frame": i, "t": i / fps, "objects": objs})
    found = compute_incidents(frames, zones, fence, cam.width, fps, rules)
    if not found:
        return None
    return min(x.start_s for x in found), max(x.end_s for x in found)


def _schedule(
    rng: np.random.Generator,
    cam: Camera,
    seed: int,
    seconds: float,
    fps: int,
    ids: _Ids,
    zones: dict[str, np.ndarray],
    fence: tuple[np.ndarray, np.ndarray, str],
    rules: RuleParams,
    falls: bool = False,
    windows: list[tuple[float, float]] | None = None,
) -> list[_Script]:
    """Scripted incidents, shifted in time so their incident windows are at least `_GAP_S` apart.

    ``windows``: active spans ``[(start_s, end_s)]``; every actor of a script then lies wholly
    inside one of them (idle stretches between them stay empty). None: the whole video, actors
    may already be on their way at t=0."""
    kinds = list(_SCRIPTS)
    rng.shuffle(kinds)
    if falls:
        kinds.insert(0, "fall")  # first, so every video with falls has at least one
    if seed % 2 == 1:
        kinds = kinds[: int(rng.integers(2, 4))]
    scripts: list[_Script] = []
    for w0, w1 in windows or [(0.0, seconds)]:
        _fill_window(rng, cam, fps, ids, zones, fence, rules, kinds, scripts, (w0, w1), contain=windows is not None)
    return scripts


def _fill_window(
    rng: np.random.Generator,
    cam: Camera,
    fps: int,
    ids: _Ids,
    zones: dict[str, np.ndarray],
    fence: tuple[np.ndarray, np.ndarray, str],
    rules: RuleParams,
    kinds: list[str],
    scripts: list[_Script],
    window_s: tuple[float, float],
    contain: bool,
) -> None:
    """Append scripts to ``scripts`` inside ``window_s`` (with ``contain``, their actors' whole lives too)."""
    w0, w1 = window_s
    prev_end = w0 - _GAP_S
    added = True
    while added:  # cycle through the kinds until the video is full (long videos repeat them)
        added = False
        for kind in kinds:
            saved = ids.next
            script = (_fall if kind == "fall" else _SCRIPTS[kind])(rng, cam, 0.0, ids)
            window = _simulated_window(script, cam, zones, fence, fps, rules)
            if window is None:
                ids.next = saved
                continue
            # actors may already be on their way at t=0, as long as the incident itself is unchanged
            dt = max(w0 + _FIRST_INCIDENT_S, prev_end + _GAP_S) - window[0]
            if contain:
                dt = max(dt, w0 - min(a.t_start for a in script.actors))
            shifted: _Script | None = _shift(_Script(kind, script.actors, window), dt)
            for _ in range(40):
                assert shifted is not None
                seen = _simulated_window(shifted, cam, zones, fence, fps, rules)
                if (
                    seen is not None
                    and abs(seen[0] - shifted.window[0]) < 0.15
                    and abs(seen[1] - shifted.window[1]) < 0.15
                ):
                    break
                shifted = _shift(shifted, 0.5)
            else:
                shifted = None
            if (
                shifted is None
                or shifted.window[1] + 1.0 > w1
                or (contain and max(a.t_end for a in shifted.actors) > w1)
            ):
                ids.next = saved
                continue
            scripts.append(shifted)
            prev_end = shifted.window[1]
            added = True


def _busy(scripts: list[_Script], kind: str, pad: float) -> list[tuple[float, float]]:
    return [
        (min(a.t_start for a in s.actors) - pad, max(a.t_end for a in s.actors) + pad)
        for s in scripts
        if s.kind == kind
    ]


def _active_windows(seconds: float, idle_fraction: float, block_s: float = 30.0) -> list[tuple[float, float]]:
    """Active spans of a video idle for ``idle_fraction`` of ``seconds``: blocks of about ``block_s``
    seconds, each with half of its share of the idle time before and half after (quiet night, busy
    day, quiet night)."""
    active = seconds * (1.0 - idle_fraction)
    n = max(1, int(round(active / block_s)))
    cycle, a = seconds / n, active / n
    return [(round(k * cycle + (cycle - a) / 2, 3), round(k * cycle + (cycle + a) / 2, 3)) for k in range(n)]


def _inside(actor: Actor, windows: list[tuple[float, float]] | None) -> bool:
    """Whether the actor's whole life lies in one of ``windows`` (always, without windows)."""
    if windows is None:
        return True
    return any(w0 <= actor.t_start and actor.t_end <= w1 for w0, w1 in windows)


def _background(
    rng: np.random.Generator,
    cam: Camera,
    seconds: float,
    scripts: list[_Script],
    ids: _Ids,
    windows: list[tuple[float, float]] | None = None,
) -> list[Actor]:
    """Walkers, traffic and parked bicycles; with ``windows``, only actors living wholly inside them
    and nothing parked (idle stretches stay empty)."""
    actors: list[Actor] = []
    fire_busy = _busy(scripts, "fire_lane", 4.0)
    for z_range, gap in ((NEAR_WALK_Z, (3.0, 7.0)), (FAR_WALK_Z, (3.0, 8.0))):
        t = float(rng.uniform(-12, 0))
        while t < seconds:
            z = float(rng.uniform(*z_range))
            hw = cam.half_width_m(z) + 1.0
            d = 1 if rng.random() < 0.5 else -1
            blocked = z_range == NEAR_WALK_Z and any(a - 15 < t < b for a, b in fire_busy)
            if not blocked:
                a = _person(rng, ids).start(t, -d * hw, z).to(d * hw, z, float(rng.uniform(1.1, 1.6)))
                if _inside(a, windows):
                    actors.append(a)
            t += float(rng.uniform(*gap))
    for lane_z, direction, gap in ((NEAR_LANE_Z, 1, (5.0, 10.0)), (FAR_LANE_Z, -1, (4.0, 9.0))):
        t = float(rng.uniform(-6, 2))
        while t < seconds:
            cls = int(rng.choice([CAR, CAR, CAR, CAR, BUS, TRUCK, TRUCK, MOTORCYCLE, BICYCLE]))
            hw = cam.half_width_m(lane_z) + 8.0
            speed = float(rng.uniform(4.0, 6.0) if cls == BICYCLE else rng.uniform(6.0, 10.0))
            if not (lane_z == NEAR_LANE_Z and any(a - 6 < t < b for a, b in fire_busy)):
                actor = Actor(ids(), cls, random_look(rng, cls))
                if cls in (BICYCLE, MOTORCYCLE):
                    actor.rider = (ids(), random_look(rng, PERSON))
                actor.start(t, -direction * hw, lane_z).to(direction * hw, lane_z, speed)
                if _inside(actor, windows):
                    actors.append(actor)
            t += float(rng.uniform(*gap)) + 12.0 / speed
    if windows is not None:
        return actors
    for x in rng.uniform(-9.0, -5.5, int(rng.integers(0, 3))):  # parked bicycles at the near curb, left of the path
        cls = BICYCLE if rng.random() < 0.75 else MOTORCYCLE
        actors.append(Actor(ids(), cls, random_look(rng, cls)).start(-1.0, float(x), 14.0).wait(seconds + 2.0))
    return actors


# -- the video ----------------------------------------------------------------------------
@dataclass(frozen=True)
class VideoTruth:
    """Ground truth of one video; `to_dict` gives the agreed JSON (schema ``campusguard.synth.video/1``)."""

    seed: int
    video: str
    fps: int
    resolution_wh: tuple[int, int]
    zones: dict[str, list[list[float]]]
    lines: dict[str, dict]
    params: dict
    frames: list[dict]
    incidents: list[dict]
    lighting: str
    camera_id: str = "cam0"
    idle_fraction: float = 0.0
    active_windows: list[tuple[float, float]] | None = None

    @property
    def num_frames(self) -> int:
        return len(self.frames)

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "seed": self.seed,
            "camera_id": self.camera_id,
            "video": self.video,
            "fps": self.fps,
            "resolution_wh": list(self.resolution_wh),
            "num_frames": self.num_frames,
            "lighting": self.lighting,
            "zones": {k: {"polygon": v} for k, v in self.zones.items()},
            "lines": self.lines,
            "params": self.params,
            "frames": self.frames,
            "incidents": self.incidents,
        } | (
            {"idle_fraction": self.idle_fraction, "active_windows_s": [list(w) for w in self.active_windows or []]}
            if self.idle_fraction > 0
            else {}
        )

    def save(self, path: str | Path) -> Path:
        p = Path(path)
        p.write_text(json.dumps(self.to_dict(), separators=(",", ":")))
        return p


def load_video_truth(path: str | Path) -> VideoTruth:
    """Read a ground-truth JSON written by `generate_video`."""
    p = Path(path)
    try:
        d = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InvalidInputError(f"cannot read video ground truth {p}: {exc}") from exc
    if d.get("schema") != SCHEMA:
        raise InvalidInputError(f"{p} is not a {SCHEMA} ground-truth file (schema {d.get('schema')!r})")
    return VideoTruth(
        d["seed"],
        d["video"],
        d["fps"],
        tuple(d["resolution_wh"]),
        {k: v["polygon"] for k, v in d["zones"].items()},
        d["lines"],
        d["params"],
        d["frames"],
        d["incidents"],
        d.get("lighting", ""),
        d.get("camera_id", "cam0"),
        float(d.get("idle_fraction", 0.0)),
        [(float(a), float(b)) for a, b in d["active_windows_s"]] if "active_windows_s" in d else None,
    )


class SynthVideo:
    """A scripted video: `frame(i)` renders frame ``i`` and its tracked boxes, in memory.

    Args:
        seed: video seed (even seeds contain all four incident kinds).
        size_wh: frame size in pixels.
        seconds: length in seconds.
        fps: frame rate.
        rules: rule thresholds used to compute the incidents.
        falls: also script people who fall, lie still and get up (incident kind ``fall``; their
            truth objects carry ``"fallen": true`` while down). Off by default, so the videos
            of every seed stay what they were.
        idle_fraction: share of the video, in [0, 1), during which nobody is in view and nothing
            moves (quiet stretches of a campus day and night, `_active_windows`): scripts and
            traffic live wholly inside the active spans and nothing is parked. 0 (the default)
            keeps the videos of every seed what they were.
        effects: what happens to the camera's view (`view_effects.ViewEffect`: covered, defocused,
            turned or frozen, and nuisances such as dusk, a flash or shake); the problems among
            them are added to the truth's incidents as ``camera_health`` ones. None by default.
    """

    def __init__(
        self,
        seed: int,
        size_wh: tuple[int, int] = (640, 360),
        seconds: float = 40.0,
        fps: int = 10,
        rules: RuleParams | None = None,
        falls: bool = False,
        idle_fraction: float = 0.0,
        effects: Sequence[ViewEffect] = (),
    ) -> None:
        if not 0.0 <= idle_fraction < 1.0:
            raise InvalidInputError(f"idle fraction must be within [0, 1), got {idle_fraction}")
        if seed < 0 or fps < 1 or seconds <= 0 or min(size_wh) < 16:
            raise InvalidInputError(f"bad video arguments: seed {seed}, size {size_wh}, seconds {seconds}, fps {fps}")
        self.seed, self.size_wh, self.seconds, self.fps = (
            seed,
            (int(size_wh[0]), int(size_wh[1])),
            float(seconds),
            int(fps),
        )
        self.falls = bool(falls)
        self.effects = tuple(effects)
        self.rules = rules or (RuleParams(fall_min_seconds=3.0) if self.falls else RuleParams())
        self.num_frames = int(round(self.seconds * self.fps))
        W, H = self.size_wh
        self.camera = Camera.for_frame(W, H)
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x71DE0]))
        self.lighting: Lighting = LIGHTINGS[int(rng.choice(len(LIGHTINGS), p=[0.4, 0.2, 0.15, 0.25]))]
        self.layout = campus_layout(rng)
        self.background = render_background(self.layout, self.camera, self.lighting, rng)
        self.noise = NoiseBank(seed, (H, W), sigmas=(2.0, 4.0))
        self.noise_level = int(rng.integers(0, 2))
        self.zones = {k: _clip_to_frame(self.camera.project(np.array(v)), W, H) for k, v in ZONES_XZ.items()}
        p1, p2 = self.camera.project(np.array(FENCE_LINE_XZ))
        self.fence_points = (np.round(p1, 1), np.round(p2, 1))
        inner = self.camera.project(np.array([[6.0, 10.0]]))[0]
        self.fence_in_side = "right" if side_of_line(inner, *self.fence_points) > 0 else "left"
        ids = _Ids()
        fence = (*self.fence_points, self.fence_in_side)
        self.idle_fraction = float(idle_fraction)
        self.active_windows = _active_windows(self.seconds, self.idle_fraction) if self.idle_fraction > 0 else None
        self.scripts = _schedule(
            rng,
            self.camera,
            seed,
            self.seconds,
            self.fps,
            ids,
            self.zones,
            fence,
            self.rules,
            self.falls,
            self.active_windows,
        )
        self.actors = [a for s in self.scripts for a in s.actors] + _background(
            rng, self.camera, self.seconds, self.scripts, ids, self.active_windows
        )

    def frame(self, index: int) -> tuple[np.ndarray, list[dict]]:
        """Render frame ``index``: ``(H, W, 3) uint8`` BGR and its objects ``[{track_id, class_id, xyxy}]``.
        Stateless: frames can be rendered in any order, nothing is kept between calls. While a
        ``freeze`` effect is on, the frame it froze on is returned (noise and labels included).
        """
        source = frozen_source_index(self.effects, index, self.fps)
        if source != index:
            return self.frame(source)
        t = index / self.fps
        frame = self.background.copy()
        items: list[Placed] = []
        fallen: set[int] = set()
        for a in self.actors:
            st = a.state(t)
            if st is None:
                continue
            x, z, _, _, dist = st
            if z < 1.0:
                continue
            view = a.view(t)
            if a.class_id != PERSON and view in ("front", "back"):
                view = "right"
            moving = a.class_id == PERSON and (st[2] != 0 or st[3] != 0)
            phase = 2 * np.pi * dist / a.stride_m if moving else 0.0
            down = a.is_down(t)
            if down:
                phase = 0.0
            sprite = draw_object(a.class_id, self.camera.px_per_m(z), view, a.look, self.lighting, phase=phase)
            if down:
                sprite = lying(sprite)
                fallen.add(a.track_id)
            u, v = self.camera.project(np.array([[x, z]]))[0]
            items.append(Placed(sprite, float(u), float(v), z, a.class_id, a.track_id))
            if a.rider is not None:
                rider = draw_rider(a.class_id, self.camera.px_per_m(z), view, a.rider[1], self.lighting, a.look.size)
                items.append(Placed(rider, float(u), float(v), z - 0.05, PERSON, a.rider[0]))
        s = self.size_wh[0] / 640.0
        objects = compose(frame, items, min_visible=_VIDEO_MIN_VISIBLE, min_size_px=12.0 * s)
        if self.effects:
            frame = np.ascontiguousarray(apply_view_effects(frame, self.effects, t, self.seed, index))
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 0xF4A3E, index]))
        self.noise.add(frame, rng, self.noise_level)
        labels = [
            {"track_id": o.key, "class_id": o.class_id, "xyxy": [round(c, 1) for c in o.xyxy]}
            | ({"fallen": True} if o.key in fallen else {})
            for o in objects
        ]
        return frame, labels

    def frames(self) -> Iterator[tuple[int, float, np.ndarray]]:
        """Yield ``(frame_index, t_seconds, frame_bgr)`` for the whole video."""
        for i in range(self.num_frames):
            yield i, i / self.fps, self.frame(i)[0]

    def truth(self, frames_objects: list[list[dict]] | None = None, video_name: str = "video_000.mp4") -> VideoTruth:
        """Ground truth; renders every frame unless the per-frame objects are given (e.g. collected
        from `frame` while writing or showing the video)."""
        if frames_objects is None:
            frames_objects = [self.frame(i)[1] for i in range(self.num_frames)]
        frames = [{"frame": i, "t": round(i / self.fps, 4), "objects": objs} for i, objs in enumerate(frames_objects)]
        incidents = compute_incidents(
            frames, self.zones, (*self.fence_points, self.fence_in_side), self.size_wh[0], self.fps, self.rules
        )
        p1, p2 = self.fence_points
        lines = {
            "fence_line": {
                "points": [p1.tolist(), p2.tolist()],
                "in_side": self.fence_in_side,
                "side_convention": "walking from points[0] to points[1] on screen (y down), "
                "'right' is the right-hand side",
            }
        }
        return VideoTruth(
            self.seed,
            video_name,
            self.fps,
            self.size_wh,
            {k: v.tolist() for k, v in self.zones.items()},
            lines,
            self.rules.to_dict(),
            frames,
            [i.to_dict() for i in incidents] + health_truth(self.effects),
            self.lighting.name,
            idle_fraction=self.idle_fraction,
            active_windows=self.active_windows,
        )


def iter_video_frames(
    seed: int, size_wh: tuple[int, int] = (640, 360), seconds: float = 40.0, fps: int = 10, falls: bool = False
) -> Iterator[tuple[int, float, np.ndarray]]:
    """Yield ``(frame_index, t_seconds, frame_bgr)`` of the video made with ``seed``, in memory.

    Frames are identical to those `generate_video` writes (before mp4 compression). The truth
    of the same video is `video_truth` with the same arguments.
    """
    yield from SynthVideo(seed, size_wh, seconds, fps, falls=falls).frames()


def video_truth(
    seed: int,
    size_wh: tuple[int, int] = (640, 360),
    seconds: float = 40.0,
    fps: int = 10,
    video_name: str = "video_000.mp4",
    falls: bool = False,
) -> VideoTruth:
    """Ground truth of the video made with ``seed`` without writing anything (renders every frame)."""
    return SynthVideo(seed, size_wh, seconds, fps, falls=falls).truth(video_name=video_name)


def generate_video(
    seed: int,
    out_dir: str | Path,
    size_wh: tuple[int, int] = (640, 360),
    seconds: float = 40.0,
    fps: int = 10,
    name: str = "video_000",
    falls: bool = False,
    idle_fraction: float = 0.0,
    effects: Sequence[ViewEffect] = (),
) -> VideoTruth:
    """Write ``out_dir/<name>.mp4`` (H.264, browsers play it) and ``out_dir/<name>.json`` (ground truth); return the truth.

    ``falls``: also script people who fall; ``idle_fraction``: quiet share of the video; ``effects``:
    what happens to the camera's view (see `SynthVideo`)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    video = SynthVideo(seed, size_wh, seconds, fps, falls=falls, idle_fraction=idle_fraction, effects=effects)
    path = out / f"{name}.mp4"
    per_frame: list[list[dict]] = []
    with H264Writer(path, float(fps), video.size_wh, crf=18) as writer:
        for i in range(video.num_frames):
            frame, objects = video.frame(i)
            writer.write(frame)
            per_frame.append(objects)
    truth = video.truth(per_frame, video_name=path.name)
    truth.save(out / f"{name}.json")
    return truth
