"""Conformance: appending and reading events, pages and cursors, cancellation, the per-session log."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, cast

import trio

from harness_kernel.events import Event, EventSchemaError, serialize_event
from harness_kernel.store._ports import EventStore, SessionEventLog
from harness_kernel.store._records import (
    APPEND_MANY_MAX,
    PAGE_MAX_LIMIT,
    SESS_CLOSED,
    SESS_EVENT_CONFLICT,
    SESS_INVALID_CURSOR,
    SESS_INVALID_RECORD,
    SESS_NOT_FOUND,
    SESS_OWNERSHIP_LOST,
    SessionStoreError,
)
from harness_kernel.store.conformance._support import (
    AT,
    ConformanceCheck,
    ManualClock,
    StoreFactory,
    created,
    expect,
    expect_equal,
    expect_error,
    expect_raises,
    expect_unchanged,
)

__all__ = ["CHECKS"]


async def _append_and_read_back(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("s1")
        event = created("s1", "e1", "ws", actor="me")
        stored = await store.append("s1", event)
        expect_equal((stored.session_id, stored.seq, stored.global_seq), ("s1", 0, 0), "sequence numbers")
        expect_equal(stored.event, event, "the returned event")
        expect_equal((await store.get("s1")).next_seq, 1, "next_seq")
        page = await store.read("s1")
        expect_equal(page.events, (stored,), "read")
        expect_equal(serialize_event(page.events[0].event), serialize_event(event), "bytes read back")
        expect_equal((await store.read_audit_events()).events, (stored,), "audit read")
        expect_equal(await store.slice("s1", 0), (stored,), "slice")


async def _sequence_numbers(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("a")
        await store.create("b")
        results = [await store.append("ab"[i % 2], created("ab"[i % 2], f"e{i}")) for i in range(10)]
        expect_equal([r.global_seq for r in results], list(range(10)), "global_seq")
        expect_equal([r.seq for r in results if r.session_id == "a"], [0, 1, 2, 3, 4], "seq of a")
        expect_equal([r.seq for r in results if r.session_id == "b"], [0, 1, 2, 3, 4], "seq of b")
        expect_equal((await store.get("a")).next_seq, 5, "next_seq of a")


async def _concurrent_appends(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("s1")
        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(store.append, "s1", created("s1", f"e{i}"))
        events = await store.slice("s1", 0)
        expect_equal([e.seq for e in events], list(range(20)), "seq")
        expect_equal(sorted(e.global_seq for e in events), list(range(20)), "global_seq")
        expect_equal(sorted(e.event.event_id for e in events), sorted(f"e{i}" for i in range(20)), "ids")


async def _idempotent_append(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("s1")
        first = await store.append("s1", created("s1", "e1"))
        expect_equal(await store.append("s1", created("s1", "e1")), first, "a repeat")
        await store.close("s1")
        expect_equal(await store.append("s1", created("s1", "e1")), first, "a repeat after close")
        await store.transition("s1", "closed", "archived")
        expect_equal(await store.append("s1", created("s1", "e1")), first, "a repeat after archive")
        expect_equal(await store.size("s1"), 1, "size")
        expect_equal((await store.read_audit_events()).next_after_global_seq, 0, "no global_seq was used")


async def _event_conflicts(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("s1")
        await store.create("s2")
        await store.append("s1", created("s1", "e1"))
        await store.create("s3")
        await store.close("s3")
        await expect_unchanged(
            store,
            SESS_EVENT_CONFLICT,
            (
                ("other content", lambda: store.append("s1", created("s1", "e1", "other"))),
                ("other actor", lambda: store.append("s1", created("s1", "e1", actor="someone"))),
                ("other session", lambda: store.append("s2", created("s1", "e1"))),
                ("other session, naming it", lambda: store.append("s2", created("s2", "e1"))),
                ("into a closed session", lambda: store.append("s3", created("s1", "e1"))),
                ("into a missing session", lambda: store.append("nope", created("nope", "e1"))),
            ),
        )


async def _closed_or_unknown(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("s1")
        await store.create("s2")
        await store.close("s1")
        await store.close("s2")
        await store.transition("s2", "closed", "archived")
        error = await expect_error(
            SESS_CLOSED, store.append("s1", created("s1", "e1")), "append to a closed session"
        )
        expect_equal(str(error), 'session "s1" is closed', "message")
        await expect_unchanged(
            store,
            SESS_CLOSED,
            (
                ("append to a closed session", lambda: store.append("s1", created("s1", "e1"))),
                ("append to an archived session", lambda: store.append("s2", created("s2", "e2"))),
            ),
        )
        await expect_unchanged(
            store,
            SESS_NOT_FOUND,
            (("append to a missing session", lambda: store.append("nope", created("nope", "e3"))),),
        )
        expect_equal((await store.read_audit_events()).events, (), "nothing stored")


async def _invalid_events(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("s1")
        valid = created("s1", "x")
        bad = Event(v=1, type="session.created", event_id="", at=AT, data=valid.data)
        await expect_raises(EventSchemaError, store.append("s1", bad), "an event without an id")
        not_an_event: Any = {"v": 1, "type": "session.created"}
        await expect_raises(TypeError, store.append("s1", not_an_event), "a dict")
        expect_equal(await store.size("s1"), 0, "nothing stored")
        expect_equal((await store.append("s1", valid)).global_seq, 0, "no global_seq was used")


async def _pages(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("a")
        for i in range(5):
            await store.append("a", created("a", f"a{i}"))
        page = await store.read("a", limit=2)
        expect_equal([e.seq for e in page.events], [0, 1], "first page")
        expect_equal((page.next_after_seq, page.has_more), (1, True), "first page cursor")
        page = await store.read("a", after_seq=page.next_after_seq, limit=3)
        expect_equal([e.event.event_id for e in page.events], ["a2", "a3", "a4"], "second page")
        expect_equal((page.next_after_seq, page.has_more), (4, False), "second page cursor")
        empty = await store.read("a", after_seq=4)
        expect_equal((empty.events, empty.next_after_seq, empty.has_more), ((), 4, False), "past the end")
        beyond = await store.read("a", after_seq=99)
        expect_equal(
            (beyond.events, beyond.next_after_seq, beyond.has_more), ((), 99, False), "far past the end"
        )
        whole = await store.read("a", limit=PAGE_MAX_LIMIT)
        expect_equal(len(whole.events), 5, "a page of the largest limit")


async def _audit(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("a")
        await store.create("b")
        for i in range(3):
            await store.append("a", created("a", f"a{i}"))
            await store.append("b", created("b", f"b{i}"))
        page = await store.read_audit_events(limit=4)
        expect_equal([e.event.event_id for e in page.events], ["a0", "b0", "a1", "b1"], "first audit page")
        expect_equal((page.next_after_global_seq, page.has_more), (3, True), "first audit cursor")
        rest = await store.read_audit_events(after_global_seq=3, limit=1000)
        expect_equal([e.global_seq for e in rest.events], [4, 5], "second audit page")
        expect_equal((rest.next_after_global_seq, rest.has_more), (5, False), "second audit cursor")
        expect_equal([e.session_id for e in rest.events], ["a", "b"], "sessions")


async def _cursors(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("a")
        await store.append("a", created("a", "a0"))
        calls: list[tuple[str, Callable[[], Awaitable[object]]]] = []
        for after, limit in ((-2, 10), (True, 10), (0, 0), (0, 1001), (1.0, 10), (0, None), (2**53, 10)):
            bad_after: Any = after
            bad_limit: Any = limit
            calls.append(
                (
                    f"read {after}, {limit}",
                    lambda a=bad_after, n=bad_limit: store.read("a", after_seq=a, limit=n),
                )
            )
            calls.append(
                (
                    f"audit {after}, {limit}",
                    lambda a=bad_after, n=bad_limit: store.read_audit_events(after_global_seq=a, limit=n),
                )
            )
        for start, stop in ((-1, None), (0, -1), (True, None), (0, 1.5)):
            bad_start: Any = start
            bad_stop: Any = stop
            calls.append((f"slice {start}, {stop}", lambda a=bad_start, b=bad_stop: store.slice("a", a, b)))
        await expect_unchanged(store, SESS_INVALID_CURSOR, tuple(calls))


async def _slices(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("a")
        await store.create("b")
        for i in range(5):
            await store.append("a", created("a", f"a{i}"))
        expect_equal([e.seq for e in await store.slice("a", 1, 3)], [1, 2], "slice 1..3")
        expect_equal([e.seq for e in await store.slice("a", 3)], [3, 4], "slice 3..")
        expect_equal(await store.slice("a", 3, 2), (), "an empty range")
        expect_equal(await store.slice("a", 9), (), "past the end")
        expect_equal(await store.slice("b", 0), (), "an empty session")
        expect_equal((await store.size("a"), await store.size("b")), (5, 0), "sizes")


async def _cancellation(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("s1")
        with trio.CancelScope() as scope:
            scope.cancel()
            await store.append("s1", created("s1", "e1"))
        expect(scope.cancelled_caught, "a cancelled append raised Cancelled")
        with trio.CancelScope() as scope:
            scope.cancel()
            await store.create("s2")
        expect_equal(await store.size("s1"), 0, "the cancelled append stored nothing")
        expect_equal([item.record.session_id for item in await store.list()], ["s1"], "sessions")


async def _event_log(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("a")
        log = store.event_log("a")
        as_object = cast(object, log)
        expect(isinstance(as_object, SessionEventLog), "event_log is the SessionEventLog")
        expect(isinstance(cast(object, log), EventStore), "event_log is an EventStore")
        expect_equal((log.session_id, log.owner_id), ("a", None), "binding")
        events = [created("a", f"e{i}") for i in range(PAGE_MAX_LIMIT + 5)]
        for event in events:
            await log.append(event)
        read = [event async for event in log.read_session("a")]
        expect_equal(read, events, "read_session pages through every event")
        expect_equal(await log.size(), len(events), "size")
        expect_equal([e.seq for e in await log.slice(3, 5)], [3, 4], "slice")
        expect_equal((await log.read(after_seq=1, limit=1)).events[0].seq, 2, "read")
        stored = await log.append(created("a", "last"))
        expect_equal(stored.seq, len(events), "append returns the stored event")
        await expect_error(
            SESS_INVALID_RECORD, log.append(created("b", "other")), "an event of another session"
        )
        try:
            log.read_session("b")
        except SessionStoreError as error:
            expect_equal(error.code, SESS_INVALID_RECORD, "read_session of another session")
        else:
            raise AssertionError("read_session of another session was allowed")
        await expect_error(SESS_INVALID_RECORD, _construct(store, ""), "an empty session id")


async def _append_many(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("a")
        await store.create("b")
        await store.append("b", created("b", "b0"))
        batch = [created("a", f"a{i}") for i in range(3)]
        stored = await store.append_many("a", batch)
        expect_equal([(e.seq, e.global_seq) for e in stored], [(0, 1), (1, 2), (2, 3)], "sequence numbers")
        expect_equal([e.event for e in stored], batch, "the returned events")
        expect_equal(await store.slice("a", 0), stored, "read back in order")
        again = await store.append_many("a", (batch[2], created("a", "a3"), created("a", "a3")))
        expect_equal(again[0], stored[2], "a repeat of a stored event returns it")
        expect_equal(again[2], again[1], "a repeat within the batch returns the first")
        expect_equal(
            [(e.seq, e.global_seq) for e in again], [(2, 3), (3, 4), (3, 4)], "repeats take no numbers"
        )
        one = await store.append_many("a", [created("a", "a4")])
        expect_equal(one[0].seq, 4, "a batch of one")
        expect_equal((await store.get("a")).next_seq, 5, "next_seq")
        log = store.event_log("a")
        logged = await log.append_many([created("a", "a5"), created("a", "a6")])
        expect_equal([e.seq for e in logged], [5, 6], "the event log appends a batch")
        await expect_error(
            SESS_INVALID_RECORD, log.append_many([created("a", "a7"), created("b", "b9")]), "another session"
        )
        expect_equal(await store.size("a"), 7, "the refused log batch stored nothing")


async def _append_many_refusals(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("a")
        await store.create("c")
        await store.append("a", created("a", "a0"))
        await store.close("c")
        fresh = created("a", "fresh")
        await expect_unchanged(
            store,
            SESS_EVENT_CONFLICT,
            (
                (
                    "a conflict after a fresh event",
                    lambda: store.append_many("a", [fresh, created("a", "a0", "other")]),
                ),
            ),
        )
        await expect_unchanged(
            store, SESS_CLOSED, (("a batch into a closed session", lambda: store.append_many("c", [fresh])),)
        )
        await expect_unchanged(
            store,
            SESS_NOT_FOUND,
            (("a batch into a missing session", lambda: store.append_many("x", [fresh])),),
        )
        too_many = [created("a", f"m{i}") for i in range(APPEND_MANY_MAX + 1)]
        await expect_unchanged(
            store,
            SESS_INVALID_RECORD,
            (
                ("an empty batch", lambda: store.append_many("a", [])),
                (f"{APPEND_MANY_MAX + 1} events", lambda: store.append_many("a", too_many)),
            ),
        )
        await store.create("o", owner_id="w1", lease_ms=1000)
        await expect_unchanged(
            store,
            SESS_OWNERSHIP_LOST,
            (
                (
                    "a batch by another owner",
                    lambda: store.append_many("o", [created("o", "o1")], owner_id="w2"),
                ),
            ),
        )
        owned = await store.append_many("o", [created("o", "o1")], owner_id="w1")
        expect_equal(owned[0].seq, 0, "a batch by the lease holder")
        bad = Event(v=1, type="session.created", event_id="", at=AT, data=fresh.data)
        await expect_raises(EventSchemaError, store.append_many("a", [fresh, bad]), "an invalid event")
        not_a_sequence: Any = iter([fresh])
        await expect_raises(TypeError, store.append_many("a", not_a_sequence), "an iterator")
        not_an_event: Any = [fresh, {"v": 1}]
        await expect_raises(TypeError, store.append_many("a", not_an_event), "a dict in the batch")
        expect_equal(await store.size("a"), 1, "nothing stored")
        whole = await store.append_many("a", [created("a", f"w{i}") for i in range(APPEND_MANY_MAX)])
        expect_equal(whole[-1].seq, APPEND_MANY_MAX, f"a batch of {APPEND_MANY_MAX}")


async def _construct(store: object, session_id: str) -> SessionEventLog:
    value: Any = store
    return SessionEventLog(value, session_id)


CHECKS: Final = (
    ConformanceCheck(
        "append_many",
        "append_many stores a batch in order with gapless numbers; repeats return the stored event",
        _append_many,
    ),
    ConformanceCheck(
        "append_many_refusals",
        "a batch that conflicts, is empty, too long or invalid, or has no open session: nothing stored",
        _append_many_refusals,
    ),
    ConformanceCheck(
        "append_and_read_back",
        "append returns seq 0 / global_seq 0 and the event; reads return it byte-identical",
        _append_and_read_back,
    ),
    ConformanceCheck(
        "sequence_numbers", "seq is gapless from 0 per session, global_seq across sessions", _sequence_numbers
    ),
    ConformanceCheck("concurrent_appends", "concurrent appends stay gapless", _concurrent_appends),
    ConformanceCheck(
        "idempotent_append",
        "appending a stored event again returns the stored one, also after close; no global_seq is used",
        _idempotent_append,
    ),
    ConformanceCheck(
        "event_conflicts",
        "a stored event id with other content or in another session is SESS_EVENT_CONFLICT",
        _event_conflicts,
    ),
    ConformanceCheck(
        "closed_or_unknown",
        "appending to a closed or archived session is SESS_CLOSED, to a missing one SESS_NOT_FOUND",
        _closed_or_unknown,
    ),
    ConformanceCheck(
        "invalid_events", "an invalid event raises the typed event error and stores nothing", _invalid_events
    ),
    ConformanceCheck("pages", "read pages with after_seq cursors, next_after_seq and has_more", _pages),
    ConformanceCheck("audit", "read_audit_events pages every session in global_seq order", _audit),
    ConformanceCheck(
        "cursors",
        "cursors must be ints >= -1, limits 1..1000, slice bounds ints >= 0: SESS_INVALID_CURSOR",
        _cursors,
    ),
    ConformanceCheck("slices", "slice(start, stop) and size()", _slices),
    ConformanceCheck(
        "cancellation",
        "an operation cancelled before it starts raises Cancelled and changes nothing",
        _cancellation,
    ),
    ConformanceCheck(
        "event_log",
        "event_log(session) is the EventStore of one session: appends, pages, refuses other sessions",
        _event_log,
    ),
)
