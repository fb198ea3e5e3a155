"""CampusGuard: YOLOv8 detection on any accelerator, and a campus-safety video analytics app.

The vision kit (this package minus ``app`` and ``cli``) has no threads or service loops.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from campusguard.detections import Detections
from campusguard.errors import CampusGuardError

__version__ = "0.1.0"
__all__ = ["Detections", "Detector", "CampusGuardError", "__version__"]

if TYPE_CHECKING:
    from campusguard.detector import Detector


def __getattr__(name: str) -> Any:
    # Detector pulls in ONNX Runtime; import it lazily so `import campusguard` stays cheap.
    if name == "Detector":
        from campusguard.detector import Detector

        return Detector
    raise AttributeError(name)
