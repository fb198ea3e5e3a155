"""Packaging facts a user relies on after `pip install`."""

from __future__ import annotations

from importlib import metadata

# Every PyPI distribution that installs the `cv2` package; two of them installed together
# overwrite each other's files and the result depends on install order.
OPENCV_DISTRIBUTIONS = {
    "opencv-python",
    "opencv-python-headless",
    "opencv-contrib-python",
    "opencv-contrib-python-headless",
}


def installed_opencv_distributions() -> set[str]:
    names = {(dist.metadata["Name"] or "").lower() for dist in metadata.distributions()}
    return names & OPENCV_DISTRIBUTIONS


def test_exactly_one_opencv_distribution_is_installed():
    assert len(installed_opencv_distributions()) == 1, installed_opencv_distributions()


def test_campusguard_requires_the_opencv_distribution_its_dependencies_require():
    """trackers and ultralytics require `opencv-python` by name; requiring another one installs both."""
    requirements = metadata.requires("campusguard") or []
    core = [r for r in requirements if "extra ==" not in r]
    opencv = [r.split(">")[0].split("=")[0].split("<")[0].strip().lower() for r in core if r.lower().startswith("opencv")]
    assert opencv == ["opencv-python"]
