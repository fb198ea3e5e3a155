"""The engine: from camera frames to events, one class per stage, each with `run()`, joined by
bounded queues of typed messages (`stages.py`); `wiring.py` builds the parts from the config.

::

    CameraReader (one per camera)  --FrameQueue-->  DetectionWorker (shared, batches across cameras)
        --queue[DetectedFrame]-->  AnalyticsWorker (one per camera: track, rules, annotate, snapshots)
        --queue[EventMessage]-->   EventWorker (`campusguard.app.engine.writer`: store commit, then alert sinks)
    Watchdog: stalled sources reconnect, dead workers stop the pipeline.

Every stage forwards `EndOfStream` for a camera once that camera is done, so a shutdown
(stop event, end of files) drains in order: open events are ended by the analytics workers and
committed by the event worker before it closes the store and the sinks.
"""
