"""Camera health from the picture alone: is this camera covered, frozen, out of focus or turned away?

`measure_view` takes the brightness-normalised measures of one frame (`ViewSample`);
`HealthMonitor` judges each sample against the camera's own history and reference view and
says which problems it shows (`Reading`). Pure and per camera: no threads, no clocks; the app's
``camera_health`` rule decides how long a problem must last to be an incident.
"""

from campusguard.health.measures import ViewSample, measure_view, similarity
from campusguard.health.monitor import PROBLEMS, HealthMonitor, HealthThresholds, Reading, ReferenceView

__all__ = [
    "PROBLEMS",
    "HealthMonitor",
    "HealthThresholds",
    "Reading",
    "ReferenceView",
    "ViewSample",
    "measure_view",
    "similarity",
]
