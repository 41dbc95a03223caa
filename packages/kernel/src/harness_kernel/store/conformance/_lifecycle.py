"""Conformance: status transitions, metadata, checkpoints, recovery and retention."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Final

import trio

from harness_kernel.store._records import (
    SESS_CHECKPOINT_CONFLICT,
    SESS_CLOSED,
    SESS_EVENT_CONFLICT,
    SESS_INVALID_CURSOR,
    SESS_INVALID_RECORD,
    SESS_INVALID_TRANSITION,
    SESS_NOT_FOUND,
    SESS_RECOVERY_CONFLICT,
    RecoverInterruptedResult,
)
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
    restored,
)

__all__ = ["CHECKS"]


async def _transitions(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("s1")
        expect_equal((await store.transition("s1", "active", "active")).changed, False, "same status")
        bad: Any = "paused"
        await expect_unchanged(
            store,
            SESS_INVALID_TRANSITION,
            (
                ("active to archived", lambda: store.transition("s1", "active", "archived")),
                ("an unknown status", lambda: store.transition("s1", "active", bad)),
            ),
        )
        closed = await store.close("s1", at="2024-06-01T00:00:00Z")
        expect_equal(closed.changed, True, "close changed")
        expect_equal(
            (closed.record.status, closed.record.closed_at), ("closed", "2024-06-01T00:00:00Z"), "closed"
        )
        expect_equal((await store.close("s1")).changed, False, "a second close changes nothing")
        archived = await store.transition("s1", "closed", "archived", at="2030-01-01T00:00:00Z")
        expect_equal(archived.record.status, "archived", "archived")
        expect_equal(archived.record.closed_at, "2024-06-01T00:00:00Z", "closed_at is set once")
        await expect_unchanged(
            store,
            SESS_INVALID_TRANSITION,
            (("archived to active", lambda: store.transition("s1", "archived", "active")),),
        )
        await store.create("s2")
        stamped = await store.close("s2")
        expect_equal(stamped.record.closed_at, "2024-05-01T12:00:00.000Z", "closed_at from the store clock")


async def _metadata_updates(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("s1", metadata={"a": 1})
        updated = await store.set_metadata("s1", {"b": [1, "x"]})
        expect_equal(updated.metadata, {"b": [1, "x"]}, "set_metadata replaces the object")
        expect_equal((await store.get("s1")).metadata, updated.metadata, "read back")
        not_object: Any = [1]
        await expect_unchanged(
            store,
            SESS_INVALID_RECORD,
            (("metadata that is a list", lambda: store.set_metadata("s1", not_object)),),
        )
        await store.close("s1")
        await expect_unchanged(
            store, SESS_CLOSED, (("set_metadata of a closed session", lambda: store.set_metadata("s1", {})),)
        )


async def _checkpoints(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("s1")
        expect_equal(await store.get_checkpoint("s1"), None, "no checkpoint yet")
        for i in range(3):
            await store.append("s1", created("s1", f"e{i}"))
        first = await store.save_checkpoint("s1", expected_revision=0, after_seq=1, payload={"n": 1})
        expect_equal((first.revision, first.after_seq, first.payload), (1, 1, {"n": 1}), "first save")
        expect_equal(first.updated_at, "2024-05-01T12:00:00.000Z", "updated_at from the store clock")
        again = await store.save_checkpoint("s1", expected_revision=0, after_seq=1, payload={"n": 1})
        expect_equal(again, first, "an identical repeat returns the saved checkpoint")
        expect_equal(await store.get_checkpoint("s1"), first, "get_checkpoint")
        await expect_unchanged(
            store,
            SESS_CHECKPOINT_CONFLICT,
            (
                (
                    "a stale revision",
                    lambda: store.save_checkpoint("s1", expected_revision=0, after_seq=2, payload=2),
                ),
                (
                    "after_seq behind",
                    lambda: store.save_checkpoint("s1", expected_revision=1, after_seq=0, payload=2),
                ),
            ),
        )
        not_json: Any = {1: 2}
        await expect_unchanged(
            store,
            SESS_INVALID_RECORD,
            (
                (
                    "after_seq at next_seq",
                    lambda: store.save_checkpoint("s1", expected_revision=1, after_seq=3, payload=2),
                ),
                (
                    "a negative revision",
                    lambda: store.save_checkpoint("s1", expected_revision=-1, after_seq=2, payload=2),
                ),
                (
                    "a payload that is no JSON",
                    lambda: store.save_checkpoint("s1", expected_revision=1, after_seq=2, payload=not_json),
                ),
            ),
        )
        second = await store.save_checkpoint(
            "s1", expected_revision=1, after_seq=2, payload=[1, 2], updated_at="T"
        )
        expect_equal((second.revision, second.payload, second.updated_at), (2, [1, 2], "T"), "second save")
        await store.close("s1")
        await expect_unchanged(
            store,
            SESS_CLOSED,
            (
                (
                    "save to a closed session",
                    lambda: store.save_checkpoint("s1", expected_revision=2, after_seq=2, payload=3),
                ),
            ),
        )
        repeat = await store.save_checkpoint(
            "s1", expected_revision=1, after_seq=2, payload=[1, 2], updated_at="T"
        )
        expect_equal(repeat, second, "an identical repeat is returned even after close")


async def _recovery(open_store: StoreFactory) -> None:
    clock = ManualClock()
    async with open_store(clock) as store:
        await store.create("s1", metadata={"kind": "k"}, owner_id="w1", lease_ms=5000)
        await store.create("s2")
        await store.append("s1", created("s1", "e1"), owner_id="w1")
        await expect_unchanged(
            store,
            SESS_RECOVERY_CONFLICT,
            (
                ("a live lease", lambda: store.recover_interrupted("s1", restored("s1"))),
                ("no lease", lambda: store.recover_interrupted("s2", restored("s2", "r2"))),
            ),
        )
        clock.advance(milliseconds=5000)
        expected = (await store.get("s1")).metadata
        await expect_unchanged(
            store,
            SESS_RECOVERY_CONFLICT,
            (
                (
                    "other metadata",
                    lambda: store.recover_interrupted("s1", restored("s1"), expected_metadata={"kind": "k"}),
                ),
            ),
        )
        await expect_unchanged(
            store,
            SESS_INVALID_RECORD,
            (
                ("another session's event", lambda: store.recover_interrupted("s1", restored("s2"))),
                ("not a session.restored", lambda: store.recover_interrupted("s1", created("s1", "e9"))),
            ),
        )
        result = await store.recover_interrupted(
            "s1", restored("s1"), expected_metadata=expected, closed_at="T"
        )
        expect_equal(result.recovered, True, "recovered")
        expect_equal((result.record.status, result.record.closed_at), ("closed", "T"), "closed")
        expect(result.event is not None and result.event.seq == 1, f"stored event {result.event!r}")
        repeat = await store.recover_interrupted("s1", restored("s1"))
        expect_equal((repeat.recovered, repeat.event), (False, result.event), "a repeat")
        await expect_unchanged(
            store,
            SESS_EVENT_CONFLICT,
            (("a different marker", lambda: store.recover_interrupted("s1", restored("s1", note="other"))),),
        )
        await expect_error(SESS_NOT_FOUND, store.recover_interrupted("nope", restored("nope")), "missing")


async def _recovery_is_once(open_store: StoreFactory) -> None:
    clock = ManualClock()
    async with open_store(clock) as store:
        for i in range(5):
            await store.create(f"s{i}", owner_id="w1", lease_ms=1)
        clock.advance(milliseconds=1)
        results: list[RecoverInterruptedResult] = []

        async def recover(session_id: str) -> None:
            results.append(
                await store.recover_interrupted(session_id, restored(session_id, f"r-{session_id}"))
            )

        async with trio.open_nursery() as nursery:
            for i in range(10):
                nursery.start_soon(recover, f"s{i % 5}")
        for i in range(5):
            mine = [r for r in results if r.record.session_id == f"s{i}"]
            expect_equal(sorted(r.recovered for r in mine), [False, True], f"recoveries of s{i}")
            expect_equal(await store.size(f"s{i}"), 1, f"one marker in s{i}")


def _at(days: float) -> str:
    return (START - timedelta(days=days)).isoformat()


async def _retention(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        for name, closed in (("old", 10.0), ("older", 20.0), ("recent", -1.0), ("active", None)):
            await store.create(name)
            await store.append(name, created(name, f"e-{name}"))
            if closed is not None:
                await store.close(name, at=_at(closed))
        await store.create("archived")
        await store.close("archived", at=_at(5))
        await store.transition("archived", "closed", "archived")
        bad_limit: Any = 0
        bad_cutoff: Any = "2024-01-01"
        await expect_unchanged(
            store,
            SESS_INVALID_CURSOR,
            (("limit 0", lambda: store.delete_closed(closed_before=START, limit=bad_limit)),),
        )
        await expect_unchanged(
            store,
            SESS_INVALID_RECORD,
            (("a text cutoff", lambda: store.delete_closed(closed_before=bad_cutoff)),),
        )
        expect_equal(
            await store.delete_closed(closed_before=START, limit=2), ("older", "old"), "oldest first"
        )
        # A closed_at that is no ISO time with an offset is never judged, so never deleted.
        await store.create("odd")
        await store.close("odd", at="last tuesday")
        await store.create("naive")
        await store.close("naive", at="2000-01-01T00:00:00")
        naive_cutoff = datetime(2024, 5, 1, 12, 0)
        expect_equal(await store.delete_closed(closed_before=naive_cutoff), ("archived",), "the rest")
        expect_equal(await store.delete_closed(closed_before=START), (), "nothing left to delete")
        kept = sorted(item.record.session_id for item in await store.list())
        expect_equal(kept, ["active", "naive", "odd", "recent"], "kept sessions")
        audit = await store.read_audit_events()
        expect_equal(
            [e.session_id for e in audit.events], ["recent", "active"], "events of deleted sessions go"
        )
        await expect_error(SESS_NOT_FOUND, store.get("old"), "a deleted session")
        await store.create("old")
        reused = await store.append("old", created("old", "e-old"))
        expect_equal((reused.seq, reused.global_seq), (0, 4), "a deleted event id may be used again")


CHECKS: Final = (
    ConformanceCheck("transitions", "active → closed → archived only; closed_at is set once", _transitions),
    ConformanceCheck(
        "metadata_updates", "set_metadata replaces an active session's metadata", _metadata_updates
    ),
    ConformanceCheck(
        "checkpoints", "checkpoints advance by revision; conflicts and bad input change nothing", _checkpoints
    ),
    ConformanceCheck(
        "recovery", "recover_interrupted closes an expired-lease session once, storing its marker", _recovery
    ),
    ConformanceCheck("recovery_is_once", "of concurrent recoveries exactly one recovers", _recovery_is_once),
    ConformanceCheck(
        "retention", "delete_closed deletes sessions closed before the cutoff with their events", _retention
    ),
)
