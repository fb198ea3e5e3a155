"""Which copy of an incident's media a viewer may be given: the policy fixed when the media were
written, and the camera's as configured now, the stricter of the two; an unknown one is the strictest.

Each incident stores the camera's ``privacy.blur`` at its start (`Event.media_blur`, the store's
``media_blur`` column), when its snapshot and clip are made. Serving then never depends on the
config alone: a camera renamed or removed from the config (whose incidents the config no longer
describes), or a row recorded before the policy was stored, fails closed (`STRICTEST`): viewers get
the redacted variant or nothing, and operators' downloads of the sharp files are audited.
"""

from __future__ import annotations

__all__ = ["BLUR_STRICTNESS", "STRICTEST", "media_blur"]

BLUR_STRICTNESS: dict[str, int] = {"none": 0, "faces": 1, "persons": 2}
"""How much of a person each blur mode hides (``persons`` hides the whole box, ``faces`` its head)."""
STRICTEST = "persons"
"""The policy of media whose own is unknown."""


def media_blur(recorded: str | None, configured: str | None) -> str:
    """The blur a viewer's copy of an incident's media must have: the stricter of ``recorded`` (the
    camera's blur when the media were written; ``None``: unknown) and ``configured`` (the camera's
    blur in the config now; ``None``: the config no longer names the camera). ``none`` only when
    both are known and ``none``; an unknown mode counts as `STRICTEST`."""
    modes = [STRICTEST if m is None or m not in BLUR_STRICTNESS else m for m in (recorded, configured)]
    return max(modes, key=BLUR_STRICTNESS.__getitem__)
