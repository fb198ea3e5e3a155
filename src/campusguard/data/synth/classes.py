"""Class ids and names of the synthetic data: COCO ids, so rules written for COCO models work unchanged."""

from __future__ import annotations

from campusguard.data_names import COCO_NAMES

__all__ = [
    "COCO_NAMES",
    "SYNTH_CLASS_IDS",
    "SYNTH_NC",
    "VEHICLE_CLASS_IDS",
    "PERSON",
    "BICYCLE",
    "CAR",
    "MOTORCYCLE",
    "BUS",
    "TRUCK",
]

PERSON, BICYCLE, CAR, MOTORCYCLE, BUS, TRUCK = 0, 1, 2, 3, 5, 7

SYNTH_CLASS_IDS: tuple[int, ...] = (PERSON, BICYCLE, CAR, MOTORCYCLE, BUS, TRUCK)
"""COCO ids that the generator draws; 4 (airplane) and 6 (train) are never drawn."""

SYNTH_NC = 8
"""Number of classes in the written ``data.yaml`` (COCO ids 0..7 inclusive)."""

VEHICLE_CLASS_IDS: tuple[int, ...] = (CAR, MOTORCYCLE, BUS, TRUCK)
"""Classes the fire-lane rule watches."""
