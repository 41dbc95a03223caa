"""What the conformance checks share: the manual clock, the check record, expectations, events.

Expectations raise ``AssertionError`` explicitly (never through ``assert``), so the suite
still checks under ``python -O``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, TypeAlias

from harness_kernel.events import Event, create_event
from harness_kernel.store._ports import SessionStore
from harness_kernel.store._records import (
    SequencedEvent,
    SessionCheckpoint,
    SessionListing,
    SessionStoreError,
)

__all__ = [
    "AT",
    "START",
    "Check",
    "ConformanceCheck",
    "ManualClock",
    "StoreFactory",
    "created",
    "expect",
    "expect_equal",
    "expect_error",
    "expect_raises",
    "expect_unchanged",
    "restored",
    "snapshot",
]

START: Final = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
"""Where a :class:`ManualClock` starts unless told otherwise."""
AT: Final = "2024-05-01T12:30:00.125Z"
"""The ``at`` of the events the checks append."""

StoreFactory: TypeAlias = Callable[[Callable[[], datetime]], SessionStore]
"""Makes a new, empty, unopened store whose clock is the given callable."""
Check: TypeAlias = Callable[[StoreFactory], Awaitable[None]]


class ManualClock:
    """A store clock that moves only when told to (aware, UTC).

    Args:
        start: The first time it reads.
    """

    def __init__(self, start: datetime = START) -> None:
        self._now = start

    def __call__(self) -> datetime:
        """The current time."""
        return self._now

    def advance(self, *, milliseconds: int = 0, seconds: float = 0) -> datetime:
        """Move forward (or back, with a negative amount); the new time."""
        self._now += timedelta(milliseconds=milliseconds, seconds=seconds)
        return self._now


@dataclass(frozen=True, slots=True)
class ConformanceCheck:
    """One check of the suite: a name, what it pins, and the coroutine function that checks it.

    ``await check.run(factory)`` opens the stores it needs through ``factory`` and raises
    ``AssertionError`` (or the unexpected exception) when the store does not conform.
    """

    name: str
    description: str
    run: Check

    def __str__(self) -> str:
        """The check's name (so it reads well as a test id)."""
        return self.name


def expect(condition: bool, message: str) -> None:
    """Raise ``AssertionError(message)`` unless ``condition``."""
    if not condition:
        raise AssertionError(message)


def expect_equal(actual: object, expected: object, what: str) -> None:
    """Raise ``AssertionError`` unless ``actual == expected``."""
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")


async def expect_error(code: str, call: Awaitable[object], what: str) -> SessionStoreError:
    """Await ``call``, which must raise ``SessionStoreError`` with ``code``; the error."""
    try:
        result = await call
    except SessionStoreError as error:
        if error.code != code:
            raise AssertionError(f"{what}: expected {code}, got {error.code} ({error})") from error
        return error
    raise AssertionError(f"{what}: expected {code}, got the result {result!r}")


async def expect_raises(kind: type[BaseException], call: Awaitable[object], what: str) -> BaseException:
    """Await ``call``, which must raise an exception of type ``kind``; the exception."""
    try:
        result = await call
    except kind as error:
        return error
    raise AssertionError(f"{what}: expected {kind.__qualname__}, got the result {result!r}")


def created(
    session_id: str, event_id: str, workspace: str | None = None, *, actor: str | None = None
) -> Event:
    """A ``session.created`` event naming ``session_id`` (``workspace`` varies its content)."""
    data: dict[str, object] = {"sessionId": session_id}
    if workspace is not None:
        data["workspace"] = workspace
    return create_event("session.created", data, event_id=event_id, at=AT, actor=actor)


def restored(session_id: str, event_id: str = "r1", note: str = "crash") -> Event:
    """A ``session.restored`` event marking ``session_id`` interrupted."""
    data: dict[str, object] = {
        "sessionId": session_id,
        "afterSeq": -1,
        "availableThroughSeq": -1,
        "availableEvents": 0,
        "outcome": "interrupted",
        "note": note,
    }
    return create_event("session.restored", data, event_id=event_id, at=AT)


Snapshot: TypeAlias = tuple[
    tuple[SessionListing, ...], tuple[SequencedEvent, ...], tuple[SessionCheckpoint | None, ...]
]


async def snapshot(store: SessionStore) -> Snapshot:
    """Everything a store holds, as its public reads return it: sessions, events, checkpoints."""
    listing = await store.list()
    events: list[SequencedEvent] = []
    after = -1
    while True:
        page = await store.read_audit_events(after_global_seq=after, limit=1000)
        events.extend(page.events)
        after = page.next_after_global_seq
        if not page.has_more:
            break
    checkpoints = tuple([await store.get_checkpoint(item.record.session_id) for item in listing])
    return listing, tuple(events), checkpoints


async def expect_unchanged(
    store: SessionStore, code: str, calls: tuple[tuple[str, Callable[[], Awaitable[object]]], ...]
) -> None:
    """Each call must raise ``SessionStoreError`` with ``code`` and leave the store as it was."""
    before = await snapshot(store)
    for what, call in calls:
        await expect_error(code, call(), what)
        expect_equal(await snapshot(store), before, f"the store after the refused {what}")
