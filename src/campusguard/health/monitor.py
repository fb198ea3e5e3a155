"""`HealthMonitor`: one camera's picture judged against its own history, one sample at a time.

Each sample (`measure_view`) is compared with what this camera usually looks like: the median of
its recent healthy samples (block contrast, sharpness) and a reference view (structure). The
monitor says which problems the sample shows (`Reading.problems`); how long a problem must last
before it is an incident, and when it ends, is the caller's (the app's ``camera_health`` rule).

- ``covered``: at least ``covered_area`` of the blocks that usually have texture lost it (their
  contrast fell below ``covered_contrast`` of their usual), all at once: a bag, paint, a hand.
- ``frozen``: at most ``frozen_changed`` of the pixels changed since the previous sample (a
  stopped encoder; a real sensor's noise never stops, even on an empty night scene).
- ``blurred``: sharpness below ``blurred_sharpness`` of this camera's usual.
- ``moved``: the structure of the view is less alike the reference view than ``moved_similarity``.

Nothing is judged before ``learn_s`` seconds of samples (the camera's usual is not known yet),
except ``frozen``, which needs no history. A reference view given at construction (one kept from
an earlier run, or accepted by an admin) is used at once. Samples showing a problem never enter
the baselines, so a long problem is not learned as normal; the reference view follows slow
changes (shadows, seasons) only through samples that match it well.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from campusguard.errors import InvalidInputError
from campusguard.health.measures import ViewSample, changed_fraction, similarity

__all__ = ["PROBLEMS", "HealthMonitor", "HealthThresholds", "Reading", "ReferenceView"]

PROBLEMS: tuple[str, ...] = ("offline", "covered", "frozen", "blurred", "moved")
"""Every problem a camera can have, most telling first: a covered camera is also blurred and moved,
so only the first problem a sample shows is reported as the camera's."""

_TEXTURED = 0.02  # a block counts as textured when its usual contrast is at least this


@dataclass(frozen=True)
class HealthThresholds:
    """When a sample shows a problem (see the module docstring); fractions of the camera's usual."""

    covered_area: float = 0.7
    covered_contrast: float = 0.3
    frozen_changed: float = 0.02
    blurred_sharpness: float = 0.45
    moved_similarity: float = 0.55
    learn_s: float = 20.0
    history_s: float = 600.0
    reference_follow: float = 0.02
    reference_follow_similarity: float = 0.8

    def __post_init__(self) -> None:
        for name in ("covered_area", "covered_contrast", "blurred_sharpness", "moved_similarity", "reference_follow"):
            value = getattr(self, name)
            if not 0.0 < value <= 1.0:
                raise InvalidInputError(f"health threshold {name} must be in (0, 1], got {value}")
        if not 0.0 <= self.frozen_changed < 1.0:
            raise InvalidInputError(f"health threshold frozen_changed must be in [0, 1), got {self.frozen_changed}")
        if self.learn_s < 0 or self.history_s <= 0:
            raise InvalidInputError("health learn_s must be >= 0 and history_s > 0")


@dataclass
class ReferenceView:
    """What a camera's view is known to be: its structure map and its usual sharpness.

    Attributes:
        structure: unit structure map (`measure_view`'s ``structure``).
        sharpness: the camera's usual sharpness when the reference was made (0: unknown).
    """

    structure: np.ndarray
    sharpness: float = 0.0


@dataclass(frozen=True)
class Reading:
    """What one sample shows.

    Attributes:
        problems: the problems the sample shows, in `PROBLEMS` order (empty: healthy).
        measures: the numbers that decided it (rounded), for the incident's details.
        learning: whether the camera's usual is still being learned (only ``frozen`` judged).
    """

    problems: tuple[str, ...]
    measures: dict[str, float]
    learning: bool


@dataclass
class _History:
    times: deque[float] = field(default_factory=deque)
    sharpness: deque[float] = field(default_factory=deque)
    contrast: deque[np.ndarray] = field(default_factory=deque)

    def add(self, t: float, sample: ViewSample, keep_s: float) -> None:
        self.times.append(t)
        self.sharpness.append(sample.sharpness)
        self.contrast.append(sample.block_contrast)
        while self.times and t - self.times[0] > keep_s:
            self.times.popleft()
            self.sharpness.popleft()
            self.contrast.popleft()

    def span_s(self, t: float) -> float:
        return t - self.times[0] if self.times else 0.0


class HealthMonitor:
    """One camera's picture health (see the module docstring).

    Args:
        thresholds: when a sample shows each problem.
        reference: a known reference view, used at once (else learned from the first samples).
    """

    def __init__(self, thresholds: HealthThresholds | None = None, reference: ReferenceView | None = None) -> None:
        self.thresholds = thresholds or HealthThresholds()
        self.reference = reference
        self._learned_reference = reference is not None
        self._reference_sum: np.ndarray | None = None
        self._history = _History()
        self._previous: ViewSample | None = None
        self._first_t: float | None = None

    def usual_sharpness(self) -> float:
        """Median sharpness of the recent healthy samples (or the reference's; 0 before any)."""
        if self._history.sharpness:
            return float(np.median(np.fromiter(self._history.sharpness, float)))
        return self.reference.sharpness if self.reference is not None else 0.0

    def usual_contrast(self) -> np.ndarray | None:
        """Per-block median contrast of the recent healthy samples, or None before any."""
        if not self._history.contrast:
            return None
        return np.median(np.stack(list(self._history.contrast)), axis=0)

    def accept(self, sample: ViewSample) -> None:
        """Make ``sample``'s view the reference (an admin accepted a moved camera's new view)."""
        self.reference = ReferenceView(sample.structure.copy(), sample.sharpness or self.usual_sharpness())
        self._learned_reference = True
        self._reference_sum = None

    def observe(self, t: float, sample: ViewSample) -> Reading:
        """Judge one sample taken at ``t`` seconds (stream clock, non-decreasing)."""
        th = self.thresholds
        if self._first_t is None:
            self._first_t = t
        measures: dict[str, float] = {"brightness": round(sample.brightness, 1), "sharpness": round(sample.sharpness, 3)}
        problems: list[str] = []
        previous, self._previous = self._previous, sample
        if previous is not None:
            changed = changed_fraction(previous.detail, sample.detail)
            measures["changed"] = round(changed, 4)
            frozen = changed <= th.frozen_changed
        else:
            frozen = False
        learning = self._history.span_s(t) < th.learn_s and not self._learned_reference
        usual_contrast = self.usual_contrast()
        covered = blurred = moved = False
        if usual_contrast is not None and not learning:
            textured = usual_contrast >= _TEXTURED
            if int(textured.sum()) < 4:
                textured = np.ones_like(textured)
            lost = sample.block_contrast < th.covered_contrast * usual_contrast
            area = float(lost[textured].mean())
            measures["covered_area"] = round(area, 3)
            covered = area >= th.covered_area
        usual_sharpness = self.usual_sharpness()
        if usual_sharpness > 0 and not learning:
            ratio = sample.sharpness / usual_sharpness
            measures["sharpness_ratio"] = round(ratio, 3)
            measures["usual_sharpness"] = round(usual_sharpness, 3)
            blurred = ratio < th.blurred_sharpness
        if self.reference is not None and not learning:
            alike = similarity(self.reference.structure, sample.structure)
            measures["similarity"] = round(alike, 3)
            moved = alike < th.moved_similarity
        for name, shown in (("covered", covered), ("frozen", frozen), ("blurred", blurred), ("moved", moved)):
            if shown:
                problems.append(name)
        if not problems:
            self._learn(t, sample)
        return Reading(tuple(problems), measures, learning)

    def _learn(self, t: float, sample: ViewSample) -> None:
        """Add a healthy sample to the baselines and the reference view."""
        th = self.thresholds
        self._history.add(t, sample, th.history_s)
        if not self._learned_reference:
            total = sample.structure.astype(np.float64)
            self._reference_sum = total if self._reference_sum is None else self._reference_sum + total
            self.reference = ReferenceView(_unit(self._reference_sum), self.usual_sharpness())
            if self._history.span_s(t) >= th.learn_s:
                self._learned_reference = True
            return
        assert self.reference is not None
        if similarity(self.reference.structure, sample.structure) >= th.reference_follow_similarity:
            mixed = (1.0 - th.reference_follow) * self.reference.structure + th.reference_follow * sample.structure
            self.reference = ReferenceView(_unit(mixed), self.usual_sharpness())


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return (vector / norm if norm > 1e-9 else vector).astype(np.float32)
