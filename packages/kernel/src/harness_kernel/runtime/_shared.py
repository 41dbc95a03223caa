"""What every step of a run shares: the limits of spec §8, the text cut, the budget percentage,
the ids every run event carries and the internal signal of an observed cancellation."""

from __future__ import annotations

from typing import Final, TypedDict, TypeVar

import trio
from msgspec import UNSET, UnsetType

T = TypeVar("T")

__all__ = [
    "CLEANUP_GRACE",
    "FINISHED",
    "MAX_CALLS",
    "MAX_CONTENT",
    "MAX_DELTA",
    "MAX_PENDING_STEERING",
    "MAX_STEERING_CHARS",
    "MAX_TRANSCRIPT_BYTES",
    "Canceled",
    "QuickLock",
    "RunIds",
    "or_unset",
]

MAX_CONTENT: Final = 16 * 1_048_576
MAX_DELTA: Final = 1_048_576
MAX_CALLS: Final = 128
MAX_STEERING_CHARS: Final = 256 * 1024
MAX_PENDING_STEERING: Final = 1024
MAX_TRANSCRIPT_BYTES: Final = 4 * 1_048_576
"""The tool transcript (call arguments and results, as JSON) of one run."""
CLEANUP_GRACE: Final = 0.1
"""Seconds a model stream's ``aclose`` may take once the round is over."""
FINISHED: Final = frozenset({"completed", "failed", "canceled", "budget_exceeded"})


class Canceled(Exception):
    """Internal: the run's cancellation was observed; the producer ends with the canceled pair."""


class RunIds(TypedDict):
    """The ids every run event's payload carries; unpack it into a payload Struct."""

    run_id: str
    session_id: str
    turn_id: str


def or_unset(value: T | None) -> T | UnsetType:
    """An optional payload field: ``None`` leaves it out of the event."""
    return UNSET if value is None else value


class QuickLock:
    """A ``trio.Lock`` whose uncontended acquire does not pass through the scheduler.

    ``async with trio.Lock()`` always yields to the scheduler, even when the lock is free;
    the runtime takes its driver and writer locks a few times per event, and those
    scheduler passes were the largest part of its per-call cost. This one checks for
    cancellation exactly as ``trio.Lock`` does (a cancelled task is refused before it holds
    the lock), takes a free lock at once, and waits fairly on the ``trio.Lock`` otherwise.
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = trio.Lock()

    def locked(self) -> bool:
        """Whether some task holds the lock."""
        return self._lock.locked()

    async def __aenter__(self) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            self._lock.acquire_nowait()
        except trio.WouldBlock:
            await self._lock.acquire()

    async def __aexit__(self, *exc_info: object) -> None:
        self._lock.release()
