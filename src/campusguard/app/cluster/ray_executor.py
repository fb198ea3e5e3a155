"""`RayExecutor`: camera groups on Ray actors (``watch --ray``). Ray is imported only here, lazily.

Each group is one actor of `RayCameraGroup` (a `CameraGroup`) created with the ``cluster``
section's resource requests (``num_cpus``, ``num_gpus``, custom ``resources``), placement
(``strategy``: Ray's ``SPREAD`` or ``DEFAULT``), ``max_restarts`` and ``max_task_retries``.
When an actor's process or node dies, Ray restarts it (its constructor runs again, on any
node with the resources) and the driver's next pull starts its cameras again; a pull in
flight is retried by Ray or comes back as `Unavailable`.

For the console (``serve --ray``) the executor also asks a camera's actor for its latest frame
(`RayExecutor.frame_jpeg`), an incident's snapshot or clip (`RayExecutor.media`), and checks and
sends zone edits (`RayExecutor.check_config`, `RayExecutor.set_config`): plain actor method
calls, one in flight per camera and kind of request, each waited for at most a timeout (a call
left unanswered stays the one in flight; the next request waits on it). The latest edited
`ConfigSpec` of a group goes with each of its pulls, so a restarted actor starts with it.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Hashable
from typing import Any

from campusguard.app.cluster.driver import ClusterWatch, Unavailable
from campusguard.app.cluster.group import (
    Ack,
    Batch,
    CameraGroup,
    ClusterError,
    ConfigSpec,
    DetectorFactoryMaker,
    GroupUnavailableError,
    MediaKind,
    MediaOptions,
)
from campusguard.app.config import CameraConfig, LoadedConfig
from campusguard.app.engine.sources import FrameSource
from campusguard.app.engine.wiring import open_camera
from campusguard.errors import ConfigError, require

__all__ = ["RayCameraGroup", "RayExecutor", "check_reachable", "connect", "ray_watch"]

log = logging.getLogger("campusguard.app.cluster")

MAX_CALLS_KEPT = 256
"""Unanswered console calls kept in flight before answered ones nobody came back for are dropped."""


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
        media: the actors keep incident snapshots and clips for a console (`CameraGroup`); they
            then outlive the driver's end (the console still shows their last frames and copies
            their media) until `release`.
    """

    def __init__(
        self,
        loaded: LoadedConfig,
        *,
        address: str = "auto",
        detector_factory: DetectorFactoryMaker | None = None,
        opener: Callable[[CameraConfig], FrameSource] = open_camera,
        media: MediaOptions | None = None,
    ) -> None:
        self.loaded = loaded
        self.ray = connect(address)
        self.detector_factory = detector_factory
        self.opener = opener
        self.media_options = media
        self.actors: list[Any] = []
        self.groups: list[list[str]] = []
        self._pending: dict[int, Any] = {}  # group -> ObjectRef of its pull in flight
        self._calls: dict[Hashable, Any] = {}  # (request, camera) -> ObjectRef of the console's call in flight
        self._configs: dict[int, tuple[int, ConfigSpec]] = {}  # group -> its latest edited config
        self._version = 0
        self._lock = threading.Lock()  # the console's calls come from several threads
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
        self.groups = [list(ids) for ids in groups]
        self.actors = [  # small arguments only (`ConfigSpec`): they travel inline and survive any node's death
            cls.remote(
                ConfigSpec.of(self.loaded, ids),
                ids,
                detector_factory=self.detector_factory,
                opener=self.opener,
                media=self.media_options,
            )
            for ids in groups
        ]

    def poll(self, acks: dict[int, Ack | None], timeout_s: float) -> dict[int, Batch | Unavailable]:
        for g, ack in acks.items():
            if g not in self._pending:
                with self._lock:
                    config = self._configs.get(g)
                self._pending[g] = self.actors[g].pull.remote(ack, self.stopping, config)
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

    # the console's requests -----------------------------------------------------------------
    def group_of(self, camera_id: str) -> int:
        """The group running ``camera_id`` (``KeyError`` when none does)."""
        for g, ids in enumerate(self.groups):
            if camera_id in ids:
                return g
        raise KeyError(camera_id)

    def frame_jpeg(
        self, camera_id: str, known: Hashable | None = None, timeout_s: float = 2.0
    ) -> tuple[Hashable, bytes | None] | None:
        """`CameraGroup.frame_jpeg` of the camera's actor; `GroupUnavailableError` when it does not answer."""
        g = self.group_of(camera_id)
        return self._call(("frame", camera_id), lambda: self.actors[g].frame_jpeg.remote(camera_id, known), timeout_s)

    def media(self, camera_id: str, kind: MediaKind, event_id: str, timeout_s: float = 5.0) -> bytes | None:
        """`CameraGroup.media` of the camera's actor (an incident's snapshot or clip bytes, or ``None``)."""
        g = self.group_of(camera_id)
        return self._call(
            ("media", camera_id, kind, event_id), lambda: self.actors[g].media.remote(kind, event_id), timeout_s
        )

    def check_config(self, loaded: LoadedConfig, text: str, camera_id: str, timeout_s: float = 10.0) -> None:
        """Check an edited config (``loaded``, parsed from ``text``) against the camera's running actor.

        Raises:
            ConfigError: a zone or line leaves the camera's frame, or a rule names an unknown class.
            GroupUnavailableError: the actor did not answer (restarting).
        """
        g = self.group_of(camera_id)
        spec = ConfigSpec.of(loaded, self.groups[g], text)
        error = self._call(None, lambda: self.actors[g].check_config.remote(spec, camera_id), timeout_s)
        if error is not None:
            raise ConfigError(error)

    def set_config(self, loaded: LoadedConfig, text: str, camera_id: str, timeout_s: float = 10.0) -> None:
        """Run the camera's group with an edited config (checked by `check_config`) now and after any restart.

        Raises:
            GroupUnavailableError: the actor did not answer; it gets the config with its next pull.
        """
        g = self.group_of(camera_id)
        with self._lock:
            self._version += 1
            config = (self._version, ConfigSpec.of(loaded, self.groups[g], text))
            self._configs[g] = config
        self._call(None, lambda: self.actors[g].set_config.remote(*config), timeout_s)

    def actor_of(self, camera_id: str) -> Any:
        """The Ray actor handle running ``camera_id``."""
        return self.actors[self.group_of(camera_id)]

    def _call(self, key: Hashable | None, submit: Callable[[], Any], timeout_s: float) -> Any:
        """The result of the actor call in flight for ``key`` (submitted now if none; ``key`` None: a
        call of its own), waited for at most ``timeout_s``; `GroupUnavailableError` when unanswered."""
        if key is None:
            return self._result(submit(), timeout_s)
        with self._lock:
            ref = self._calls.get(key)
            if ref is None:
                if len(self._calls) >= MAX_CALLS_KEPT:  # drop answered calls nobody came back for
                    refs = list(self._calls.values())
                    done, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0)
                    self._calls = {k: r for k, r in self._calls.items() if r not in done}
                ref = self._calls[key] = submit()
        try:
            return self._result(ref, timeout_s)
        finally:
            with self._lock:
                if self._calls.get(key) is ref and self.ray.wait([ref], timeout=0)[0]:
                    del self._calls[key]  # answered: the next request makes a new call

    def _result(self, ref: Any, timeout_s: float) -> Any:
        ready, _ = self.ray.wait([ref], timeout=timeout_s)
        if not ready:
            raise GroupUnavailableError(f"the camera group did not answer within {timeout_s:g} s (restarting?)")
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayTaskError:
            raise  # the method itself failed: a bug, not a restart
        except self.ray.exceptions.RayError as exc:  # the actor died, is restarting, or its node is gone
            first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
            raise GroupUnavailableError(f"the camera group is unavailable: {first}") from None

    def close(self) -> None:
        """The driver is done: end the actors, unless they keep media for a console (then `release` does)."""
        if self.media_options is None:
            self.release()

    def release(self) -> None:
        """End the actors (their private media folders first); idempotent."""
        if self.media_options is not None and self.actors:
            try:
                refs = [actor.discard_media.remote() for actor in self.actors]
                self.ray.wait(refs, num_returns=len(refs), timeout=5.0)
            except Exception:
                log.debug("media folders not discarded", exc_info=True)
        for actor in self.actors:
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:  # already gone
                log.debug("actor already gone", exc_info=True)
        self.actors = []
        self.groups = []
        self._pending.clear()
        self._calls.clear()

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
