"""The runtime's cheap building blocks (issue #21): ``random_id`` and ``QuickLock``."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import trio
import trio.testing

from harness_kernel import _ids
from harness_kernel._ids import random_id
from harness_kernel.runtime._shared import QuickLock


def test_random_id_is_the_prefix_and_a_version_4_uuid_text() -> None:
    seen: set[str] = set()
    for _ in range(2000):
        value = random_id("evt")
        prefix, _, text = value.partition("-")
        parsed = uuid.UUID(text)
        assert prefix == "evt"
        assert str(parsed) == text
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
        seen.add(value)
    assert len(seen) == 2000


async def test_a_free_quick_lock_is_taken_without_a_scheduling_point() -> None:
    lock = QuickLock()
    other_ran = False

    async def other() -> None:
        nonlocal other_ran
        other_ran = True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        async with lock:
            assert lock.locked()
            # Had entering yielded to the scheduler, the other task would have run by now.
            assert not other_ran
        assert not lock.locked()


async def test_a_cancelled_task_is_refused_before_it_holds_the_quick_lock() -> None:
    lock = QuickLock()
    with trio.CancelScope() as scope:
        scope.cancel()
        with pytest.raises(trio.Cancelled):
            async with lock:
                pytest.fail("entered a lock while cancelled")
    assert not lock.locked()


async def test_a_held_quick_lock_makes_others_wait_in_order() -> None:
    lock = QuickLock()
    order: list[int] = []

    async def take(index: int) -> None:
        async with lock:
            order.append(index)
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery, lock:
        for index in range(3):
            nursery.start_soon(take, index)
        await trio.testing.wait_all_tasks_blocked()
        assert order == []
    assert sorted(order) == [0, 1, 2]


async def test_a_waiter_cancelled_while_waiting_never_holds_the_quick_lock() -> None:
    lock = QuickLock()
    entered = False

    async def wait_for_it() -> None:
        nonlocal entered
        async with lock:
            entered = True

    async with trio.open_nursery() as nursery, lock:
        nursery.start_soon(wait_for_it)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert not entered
    assert not lock.locked()


def test_now_timestamp_spells_each_moment_as_format_timestamp_across_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    start = datetime(2026, 12, 31, 23, 59, 58, 998_999, tzinfo=UTC)
    # Steps that stay within a second, cross seconds, a minute, a year, and go back in time.
    steps = [0, 1, 1_000, 1_001, 998_000, 1, 5_000_000, -7_000_000, 999, 250_000]
    moments: list[datetime] = []
    moment = start
    for step in steps:
        moment = moment + timedelta(microseconds=step)
        moments.append(moment)
    script = iter(moments)

    class Clock(datetime):
        @classmethod
        def now(cls, tz: object = None) -> datetime:
            return next(script)

    monkeypatch.setattr(_ids, "datetime", Clock)
    for expected in moments:
        assert _ids.now_timestamp() == _ids.format_timestamp(expected)
