"""Conformance: creating, reopening, getting and listing sessions; argument checks; closing the store."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, Final

from harness_kernel.store._ports import SessionStore
from harness_kernel.store._records import SESS_INVALID_RECORD, SESS_NOT_FOUND, SessionStoreError
from harness_kernel.store.conformance._support import (
    START,
    ConformanceCheck,
    ManualClock,
    StoreFactory,
    created,
    expect,
    expect_equal,
    expect_error,
    expect_unchanged,
)

__all__ = ["CHECKS"]

_BAD_IDS: Final[tuple[object, ...]] = ("", "x" * 257, 5, None, "lone \ud800 surrogate", b"bytes")


async def _create_defaults(open_store: StoreFactory) -> None:
    clock = ManualClock()
    async with open_store(clock) as store:
        record = await store.create()
        expect(record.session_id.startswith("sess-"), f"generated id {record.session_id!r}")
        expect_equal(record.status, "active", "status")
        expect_equal(record.task_id, None, "task_id")
        expect_equal(record.metadata, {}, "metadata")
        expect_equal((record.next_seq, record.checkpoint_revision), (0, 0), "next_seq, checkpoint_revision")
        expect_equal((record.closed_at, record.lease), (None, None), "closed_at, lease")
        expect_equal(record.created_at, "2024-05-01T12:00:00.000Z", "created_at from the store clock")
        expect_equal(await store.get(record.session_id), record, "get after create")
        expect_equal(await store.current_time(), START, "current_time")
        other = await store.create()
        expect(other.session_id != record.session_id, "two generated ids are equal")


async def _naive_clock_is_utc(open_store: StoreFactory) -> None:
    async with open_store(lambda: datetime(2024, 1, 2, 3, 4, 5, 678_900)) as store:
        expect_equal(await store.current_time(), datetime(2024, 1, 2, 3, 4, 5, 678_900, tzinfo=UTC), "now")
        record = await store.create("s1")
        expect_equal(record.created_at, "2024-01-02T03:04:05.678Z", "created_at (milliseconds, Z)")


async def _reopen(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        first = await store.create("s1", created_at="2024-01-01T00:00:00Z", metadata={"a": 1})
        again = await store.create("s1", task_id="t1", created_at="2030-01-01T00:00:00Z", metadata={"b": 2})
        expect_equal(again.created_at, first.created_at, "created_at after reopen")
        expect_equal(again.task_id, "t1", "a missing task_id is filled")
        expect_equal(again.metadata, {"a": 1}, "metadata after reopen")
        third = await store.create("s1", task_id="t2")
        expect_equal(third.task_id, "t1", "a task_id is never replaced")
        expect_equal(third, again, "a reopen that changes nothing returns the record")
        await store.close("s1", at="2024-02-01T00:00:00Z")
        closed = await store.create("s1")
        expect_equal(closed.status, "closed", "reopening keeps a closed session closed")


async def _not_found(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        error = await expect_error(SESS_NOT_FOUND, store.get("missing"), "get of a missing session")
        expect_equal(str(error), 'session "missing" not found', "message")
        await expect_unchanged(
            store,
            SESS_NOT_FOUND,
            (
                ("read", lambda: store.read("missing")),
                ("slice", lambda: store.slice("missing", 0)),
                ("size", lambda: store.size("missing")),
                ("append", lambda: store.append("missing", created("missing", "e1"))),
                ("close", lambda: store.close("missing")),
                ("transition", lambda: store.transition("missing", "closed", "archived")),
                ("set_metadata", lambda: store.set_metadata("missing", {})),
                ("renew_lease", lambda: store.renew_lease("missing", "w1", lease_ms=1000)),
                ("reopen", lambda: store.reopen("missing", owner_id="w1", lease_ms=1000)),
                ("get_checkpoint", lambda: store.get_checkpoint("missing")),
                (
                    "save_checkpoint",
                    lambda: store.save_checkpoint("missing", expected_revision=0, after_seq=0, payload={}),
                ),
            ),
        )
        expect_equal(await store.list(), (), "nothing was created")


async def _listing(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("a", created_at="2024-01-01T00:00:00Z")
        await store.create("b", created_at="2024-01-02T00:00:00Z")
        await store.create("c", created_at="2024-01-02T00:00:00Z")
        await store.create("B", created_at="2024-01-02T00:00:00Z")
        await store.append("a", created("a", "e1"))
        await store.append("a", created("a", "e2"))
        await store.append("b", created("b", "e3"))
        listing = await store.list()
        expect_equal([item.record.session_id for item in listing], ["c", "b", "B", "a"], "order")
        expect_equal([item.event_count for item in listing], [0, 1, 0, 2], "event counts")
        expect_equal(listing[3].record, await store.get("a"), "listed record")


Call = Callable[[], Awaitable[object]]


def _calls_with_a_bad_id(store: SessionStore, bad: object) -> list[tuple[str, Call]]:
    """Calls that each take ``bad`` as one id or timestamp (None means "absent" for some)."""
    value: Any = bad
    calls: list[tuple[str, Call]] = [
        ("get", lambda: store.get(value)),
        ("append", lambda: store.append(value, created("s1", "e1"))),
        ("read", lambda: store.read(value)),
        ("renew_lease owner_id", lambda: store.renew_lease("s1", value, lease_ms=10)),
    ]
    if bad is not None:
        calls += [
            ("create session_id", lambda: store.create(value)),
            ("create task_id", lambda: store.create("s2", task_id=value)),
            ("create created_at", lambda: store.create("s2", created_at=value)),
            ("create owner_id", lambda: store.create("s2", owner_id=value, lease_ms=10)),
            ("append owner_id", lambda: store.append("s1", created("s1", "e1"), owner_id=value)),
            ("close owner_id", lambda: store.close("s1", owner_id=value)),
            ("close at", lambda: store.close("s1", at=value)),
            ("set_metadata owner_id", lambda: store.set_metadata("s1", {}, owner_id=value)),
        ]
    return calls


async def _ids(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("s1")
        for bad in _BAD_IDS:
            await expect_unchanged(store, SESS_INVALID_RECORD, tuple(_calls_with_a_bad_id(store, bad)))
        expect_equal((await store.create("x" * 256)).session_id, "x" * 256, "a 256-character id")
        expect_equal(len(await store.list()), 2, "sessions after the refused calls")


async def _metadata(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        bad_values: tuple[Any, ...] = ([1], {"k": float("nan")}, {"k": {1, 2}}, {1: "x"}, "text")
        await expect_unchanged(
            store,
            SESS_INVALID_RECORD,
            tuple(
                (f"metadata {bad!r}", lambda bad=bad: store.create("s1", metadata=bad)) for bad in bad_values
            ),
        )
        record = await store.create("s1", metadata={"nested": {"list": [1, 2.5, None, True, "é"]}})
        expect_equal(record.metadata, {"nested": {"list": [1, 2.5, None, True, "é"]}}, "metadata")
        expect_equal((await store.get("s1")).metadata, record.metadata, "metadata read back")


async def _closed_store(open_store: StoreFactory) -> None:
    store = open_store(ManualClock())
    await store.create("s1")
    await store.aclose()
    await store.aclose()
    for what, call in (
        ("get", lambda: store.get("s1")),
        ("create", lambda: store.create("s2")),
        ("list", store.list),
        ("append", lambda: store.append("s1", created("s1", "e1"))),
        ("read", lambda: store.read("s1")),
        ("read_audit_events", store.read_audit_events),
        ("size", lambda: store.size("s1")),
        ("close", lambda: store.close("s1")),
        ("renew_lease", lambda: store.renew_lease("s1", "w1", lease_ms=1000)),
        ("get_checkpoint", lambda: store.get_checkpoint("s1")),
        ("delete_closed", lambda: store.delete_closed(closed_before=START)),
    ):
        error = await expect_error(SESS_INVALID_RECORD, call(), what)
        expect_equal(str(error), "session store is closed", f"{what} message")
    try:
        async with store:
            raise AssertionError("a closed store opened again")
    except SessionStoreError as error:
        expect_equal(error.code, SESS_INVALID_RECORD, "reopening a closed store")


CHECKS: Final = (
    ConformanceCheck(
        "create_defaults",
        "create() makes an active, empty session with a generated sess-… id, stamped by the store clock",
        _create_defaults,
    ),
    ConformanceCheck(
        "naive_clock_is_utc",
        "a naive store clock is taken as UTC; timestamps have milliseconds",
        _naive_clock_is_utc,
    ),
    ConformanceCheck(
        "reopen",
        "create() of an existing id keeps created_at and metadata and only fills a missing task_id",
        _reopen,
    ),
    ConformanceCheck("not_found", "every operation on a missing session raises SESS_NOT_FOUND", _not_found),
    ConformanceCheck(
        "listing", "list() is newest first (created_at, then session_id) with event counts", _listing
    ),
    ConformanceCheck(
        "ids", "ids and timestamps must be strings of 1..256 characters without lone surrogates", _ids
    ),
    ConformanceCheck("metadata", "metadata must be a JSON object and reads back equal", _metadata),
    ConformanceCheck(
        "closed_store",
        "after aclose() every operation raises SESS_INVALID_RECORD 'session store is closed'",
        _closed_store,
    ),
)
