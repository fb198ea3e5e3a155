"""`assign_cameras`: which live node should run each camera (pure; every node computes the same answer).

Rendezvous (highest-random-weight) hashing with capacities: each camera ranks the live nodes by a
hash of (camera, node). Every node may run ``floor(cameras / nodes)`` cameras, and the first
``cameras mod nodes`` nodes to fill up one more, so the load is even. In order:

1. a camera that names a preferred node goes there while it is live;
2. a camera stays on the live node that runs it now (its valid lease), while that node has room:
   a node that dies moves only its own cameras, and a node that returns takes only its share;
3. every other camera goes to the first node in its ranking that has room.

The answer depends only on the live nodes, the cameras and who runs what (the leases table every
node reads), never on who asks: nodes agree without talking to each other, and a camera changes
node once per membership change, never back and forth.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

__all__ = ["assign_cameras", "rank_nodes"]


def _weight(camera: str, node: str) -> int:
    digest = hashlib.blake2b(f"{camera}\x00{node}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def rank_nodes(camera: str, nodes: Sequence[str]) -> list[str]:
    """``nodes`` in ``camera``'s rendezvous order (highest weight first; ties by name)."""
    return sorted(nodes, key=lambda n: (-_weight(camera, n), n))


class _Rooms:
    """How many more cameras each node may take: ``floor`` each, and ``extra`` nodes one more."""

    def __init__(self, nodes: list[str], cameras: int) -> None:
        self.floor, self.extra = divmod(cameras, len(nodes))
        self.count = dict.fromkeys(nodes, 0)

    def take(self, node: str) -> bool:
        n = self.count.get(node)
        if n is None:
            return False
        if n < self.floor:
            self.count[node] = n + 1
            return True
        if n == self.floor and self.extra > 0:
            self.count[node] = n + 1
            self.extra -= 1
            return True
        return False


def assign_cameras(
    cameras: Sequence[str],
    nodes: Sequence[str],
    preferred: Mapping[str, str] | None = None,
    current: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Camera id to the node that should run it, over the live ``nodes`` (empty: no camera assigned).

    Args:
        cameras: the site's enabled cameras.
        nodes: the live nodes' names.
        preferred: camera id to the node it prefers (its config's ``node``).
        current: camera id to the node that runs it now (valid leases).
    """
    live = sorted(set(nodes))
    if not live:
        return {}
    order = sorted(set(cameras))
    rooms = _Rooms(live, len(order))
    chosen: dict[str, str] = {}
    for wanted in (preferred or {}, current or {}):
        for camera in order:
            node = wanted.get(camera)
            if camera not in chosen and node is not None and rooms.take(node):
                chosen[camera] = node
    for camera in order:
        if camera not in chosen:
            chosen[camera] = next(n for n in rank_nodes(camera, live) if rooms.take(n))
    return chosen
