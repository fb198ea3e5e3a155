"""The event bus: bounded drop-oldest queues per subscriber; publishing never waits."""

from __future__ import annotations

import threading
import time

import pytest

from campusguard.app.console.eventbus import DropOldestQueue, EventBus


def test_drop_oldest_queue_keeps_the_newest_items() -> None:
    q: DropOldestQueue[int] = DropOldestQueue(3)
    for i in range(5):
        q.offer(i)
    assert len(q) == 3 and q.dropped == 2
    assert [q.get(0.01) for _ in range(4)] == [2, 3, 4, None]
    assert q.delivered == 3


def test_get_waits_for_an_item_from_another_thread() -> None:
    q: DropOldestQueue[str] = DropOldestQueue(1)
    threading.Timer(0.05, q.offer, args=("x",)).start()
    t0 = time.monotonic()
    assert q.get(2.0) == "x"
    assert time.monotonic() - t0 < 1.0


def test_close_wakes_a_waiting_get_and_ignores_later_offers() -> None:
    q: DropOldestQueue[int] = DropOldestQueue(2)
    threading.Timer(0.05, q.close).start()
    t0 = time.monotonic()
    assert q.get(2.0) is None
    assert time.monotonic() - t0 < 1.0
    q.offer(1)
    assert len(q) == 0


@pytest.mark.parametrize("size", [0, -1])
def test_queue_size_must_be_positive(size: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        DropOldestQueue(size)


def test_every_subscriber_gets_every_event_and_a_stalled_one_blocks_nobody() -> None:
    bus = EventBus(maxsize=4)
    reader, stalled = bus.subscribe(maxsize=256), bus.subscribe()
    got: list[dict] = []

    def consume() -> None:
        while (e := reader.get(1.0)) is not None:
            got.append(e)

    t = threading.Thread(target=consume)
    t.start()
    t0 = time.monotonic()
    for i in range(200):
        bus.publish({"id": i})
        time.sleep(0.0005)  # the reader has room for everything; the stalled subscriber never reads
    elapsed = time.monotonic() - t0
    t.join(5)
    assert elapsed < 2.0
    assert [e["id"] for e in got] == list(range(200))
    assert len(stalled) == 4 and stalled.dropped == 196
    assert [stalled.get(0) for _ in range(4)] == [{"id": i} for i in range(196, 200)]


def test_closed_subscriptions_leave_the_bus() -> None:
    bus = EventBus()
    with bus.subscribe() as sub:
        assert bus.subscriber_count() == 1
    assert bus.subscriber_count() == 0
    bus.publish({"id": 1})
    assert sub.get(0) is None
    other = bus.subscribe(maxsize=2)
    bus.close()
    assert other.closed and bus.subscriber_count() == 0


def test_the_queue_types_are_one() -> None:
    """The event bus's, the live view's, the clip recorder's and the readers' queues are one `BoundedQueue`."""
    from campusguard.app.engine.sources import FrameQueue
    from campusguard.app.infra.queues import BoundedQueue
    from campusguard.app.media.live import Viewer

    for cls in (DropOldestQueue, Viewer, FrameQueue):
        assert issubclass(cls, BoundedQueue), cls


def test_a_waiting_put_gives_up_on_stop_and_a_get_makes_room() -> None:
    import threading

    from campusguard.app.infra.queues import BoundedQueue

    q: BoundedQueue[int] = BoundedQueue(1, drop_oldest=False)
    stop = threading.Event()
    assert q.put(1, stop)
    stop.set()
    assert not q.put(2, stop)  # full, and asked to stop: not queued
    assert q.get_nowait() == 1 and q.get_nowait() is None
    assert q.put(3, beyond_maxsize=True) and q.put(4, beyond_maxsize=True) and len(q) == 2
    q.close()
    assert not q.put(5) and q.get(1.0) is None
