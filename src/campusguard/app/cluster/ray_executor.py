"""`RayExecutor`: camera groups on Ray actors (``watch --ray``). Ray is imported only here, lazily.

Each group is one actor of `RayCameraGroup` (a `CameraGroup`) created with the ``cluster``
section's resource requests (``num_cpus``, ``num_gpus``, custom ``resources``), placement
(``strategy``: Ray's ``SPREAD`` or ``DEFAULT``), ``max_restarts`` and ``max_task_retries``.
When an actor's process or node dies, Ray restarts it (its constructor runs again, on any
node with the resources) and the driver's next pull starts its cameras again; a pull in
flight is retried by Ray or comes back as `Unavailable`.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from typing import Any

from campusguard.app.cluster.driver import ClusterWatch, Unavailable
from campusguard.app.cluster.group import Ack, Batch, CameraGroup, ClusterError, ConfigSpec, DetectorFactoryMaker
from campusguard.app.config import CameraConfig, LoadedConfig
from campusguard.app.service import open_camera
from campusguard.app.sources import FrameSource
from campusguard.errors import require

__all__ = ["RayCameraGroup", "RayExecutor", "check_reachable", "connect", "ray_watch"]

log = logging.getLogger("campusguard.app.cluster")


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """`ClusterError` at once when nothing answers at a ``host:port`` address (Ray itself retries for minutes)."""
    if address in ("auto", "local") or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ClusterError(f"--ray {address!r}: expected auto, local, HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ClusterError(f"no Ray cluster answers at {address} ({exc.strerror or type(exc).__name__})") from None


def connect(address: str, *, num_cpus: int | None = None) -> Any:
    """Join the Ray cluster at ``address`` (``auto``: the one started on this machine; ``local``: a new
    private one in this process, with ``num_cpus`` CPUs, never a cluster already running here);
    `ClusterError` when there is none. Returns the ``ray`` module. Used by ``watch --ray`` and
    ``scan --ray``."""
    ray = require("ray", "ray")
    if ray.is_initialized():
        return ray
    check_reachable(address)
    try:
        if address == "local":
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, logging_level=logging.WARNING)
        else:
            ray.init(address=address, logging_level=logging.WARNING)  # actors' warnings reach this stderr
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ClusterError(f"cannot join a Ray cluster at {address!r}: {first}") from None
    return ray


class RayCameraGroup(CameraGroup):
    """A `CameraGroup` that can say which Ray node it runs on."""

    def node_id(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())


class RayExecutor:
    """Camera groups on Ray actors.

    Args:
        loaded: the validated config (its ``cluster`` section gives the actors' options).
        address: the cluster (``auto``, ``ray://host:port``, ``host:port`` or ``local``).
        detector_factory: builds each group's detector factory (pickled to the actors).
        opener: opens a camera source (pickled to the actors).
    """

    def __init__(
        self,
        loaded: LoadedConfig,
        *,
        address: str = "auto",
        detector_factory: DetectorFactoryMaker | None = None,
        opener: Callable[[CameraConfig], FrameSource] = open_camera,
    ) -> None:
        self.loaded = loaded
        self.ray = connect(address)
        self.detector_factory = detector_factory
        self.opener = opener
        self.actors: list[Any] = []
        self._pending: dict[int, Any] = {}  # group -> ObjectRef of its pull in flight
        self.stopping = False

    def actor_options(self) -> dict[str, Any]:
        """The ``.options(...)`` of every camera-group actor, from the ``cluster`` section."""
        c = self.loaded.config.cluster
        return {
            "num_cpus": c.num_cpus,
            "num_gpus": c.num_gpus,
            "resources": dict(c.resources),
            "max_restarts": c.max_restarts,
            "max_task_retries": c.max_task_retries,
            "scheduling_strategy": "SPREAD" if c.strategy == "spread" else "DEFAULT",
        }

    def start(self, groups: list[list[str]]) -> None:
        cls = self.ray.remote(RayCameraGroup).options(**self.actor_options())
        self.actors = [  # small arguments only (`ConfigSpec`): they travel inline and survive any node's death
            cls.remote(ConfigSpec.of(self.loaded, ids), ids, detector_factory=self.detector_factory, opener=self.opener)
            for ids in groups
        ]

    def poll(self, acks: dict[int, Ack | None], timeout_s: float) -> dict[int, Batch | Unavailable]:
        for g, ack in acks.items():
            if g not in self._pending:
                self._pending[g] = self.actors[g].pull.remote(ack, self.stopping)
        by_ref = {ref: g for g, ref in self._pending.items() if g in acks}
        if not by_ref:
            return {}
        ready, _ = self.ray.wait(list(by_ref), num_returns=len(by_ref), timeout=timeout_s)
        out: dict[int, Batch | Unavailable] = {}
        for ref in ready:
            g = by_ref[ref]
            del self._pending[g]
            try:
                out[g] = self.ray.get(ref)
            except self.ray.exceptions.RayActorError as exc:
                lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
                if getattr(exc, "actor_init_failed", False):  # no restart will help: say why, once
                    raise ClusterError(f"camera group {g}: its Ray actor could not be created: {lines[-1]}") from None
                out[g] = Unavailable(lines[0])
        return out

    def stop(self) -> None:
        self.stopping = True
        for actor in self.actors:
            actor.stop.remote()

    def close(self) -> None:
        for actor in self.actors:
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:  # already gone
                log.debug("actor already gone", exc_info=True)
        self.actors = []
        self._pending.clear()

    def describe(self, group: int) -> str:
        """The Ray node the group's actor runs on (short id), or ``unknown``."""
        try:
            return "node " + str(self.ray.get(self.actors[group].node_id.remote(), timeout=10))[:12]
        except Exception:
            return "unknown node"


def ray_watch(
    loaded: LoadedConfig, address: str, *, detector_factory: DetectorFactoryMaker | None = None, **kwargs: Any
) -> ClusterWatch:
    """`watch --ray ADDRESS`: the driver over camera groups on Ray actors (``kwargs`` go to `ClusterWatch`)."""
    return ClusterWatch(loaded, RayExecutor(loaded, address=address, detector_factory=detector_factory), **kwargs)
