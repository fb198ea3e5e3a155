"""Data sets: the deterministic synthetic campus generator lives in `campusguard.data.synth`."""
