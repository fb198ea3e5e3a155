"""Which sharp-media downloads are new: one audit entry per download, Range requests included.

A video player fetches a clip in byte ranges (``Range: bytes=0-``, then later parts), and a client
can ask for ``bytes=1-`` first to skip byte 0. So a download is not "a request that returns byte
0": the first byte range of a file by a user opens a download, which is audited, and that user's
further byte ranges of the same file within ``window_s`` (10 minutes from the opening) belong to it.
A request without a ``Range`` header is a whole download of its own: always audited, and it opens
no byte-range download (the user's next byte range is audited too).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["DownloadLog"]


class DownloadLog:
    """Byte-range downloads opened recently, per (user, file); bounded, oldest forgotten first.

    Args:
        window_s: how long the byte ranges of a file belong to the download that opened it.
        max_entries: downloads remembered (the oldest forgotten first: then a range is audited again).
        clock: monotonic seconds (a parameter for tests).
    """

    def __init__(
        self, *, window_s: float = 600.0, max_entries: int = 10_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.window_s = window_s
        self._max = max_entries
        self._clock = clock
        self._opened: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._lock = threading.Lock()

    def opens_download(self, user: str, file: str, *, ranged: bool) -> bool:
        """Whether this request is a new download to audit (and remember it as one when it is).

        Args:
            user: who asks.
            file: which file (e.g. ``clip:<event id>``).
            ranged: the request has a ``Range`` header.
        """
        if not ranged:  # a whole download of its own; it opens no byte-range download
            return True
        now = self._clock()
        key = (user, file)
        with self._lock:
            opened = self._opened.get(key)
            if opened is not None and now - opened < self.window_s:
                return False
            self._opened[key] = now
            self._opened.move_to_end(key)
            while len(self._opened) > self._max:
                self._opened.popitem(last=False)
        return True
