"""Camera groups on several processes or machines: `watch --ray` and `serve --ray`.

Modules:
    `group`: `CameraGroup`, one group of cameras run by `WatchService` with its events kept in
        an `Outbox` until the driver acknowledges them; `camera_groups`, `group_config`.
    `driver`: `ClusterWatch`, the driver that owns the store and the sinks, pulls, deduplicates
        and commits the groups' events, ends incidents a dead group left open; `LocalExecutor`.
    `ray_executor`: `RayExecutor`, the groups on Ray actors (Ray imported lazily, there only).
"""
