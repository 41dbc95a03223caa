"""Conformance: ``reopen`` — taking a closed session up again under a new owner's lease [issue #23]."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

import trio

from harness_kernel.store._records import (
    LEASE_MAX_MS,
    SESS_CLOSED,
    SESS_INVALID_RECORD,
    SESS_NOT_FOUND,
    SESS_OWNERSHIP_LOST,
    SESS_RECOVERY_CONFLICT,
    SessionLease,
    SessionRecord,
    SessionStoreError,
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


def _lease(owner_id: str, milliseconds: int) -> SessionLease:
    return SessionLease(owner_id=owner_id, expires_at=START + timedelta(milliseconds=milliseconds))


async def _reopen_closed(open_store: StoreFactory) -> None:
    clock = ManualClock()
    async with open_store(clock) as store:
        await store.create("s1", task_id="t1", metadata={"kind": "k"}, owner_id="w1", lease_ms=1000)
        await store.append("s1", created("s1", "e1"), owner_id="w1")
        checkpoint = await store.save_checkpoint("s1", expected_revision=0, after_seq=0, payload={"c": 1})
        clock.advance(milliseconds=1000)
        closed = (await store.recover_interrupted("s1", restored("s1"), closed_at="T")).record
        clock.advance(milliseconds=500)
        reopened = await store.reopen("s1", owner_id="w2", lease_ms=2000, expected_metadata=closed.metadata)
        expect_equal(
            (reopened.status, reopened.closed_at), ("active", None), "active again, closed_at cleared"
        )
        expect_equal(reopened.lease, _lease("w2", 3500), "the new owner's lease, from the store clock")
        expect_equal(
            reopened.metadata,
            {"kind": "k", "ownerId": "w2", "leaseExpiresAt": "2024-05-01T12:00:03.500Z"},
            "the caller's metadata is kept, the lease replaced",
        )
        expect_equal(
            (reopened.task_id, reopened.created_at, reopened.next_seq, reopened.checkpoint_revision),
            ("t1", closed.created_at, 2, 1),
            "task, creation time, events and checkpoint are kept",
        )
        expect_equal(await store.get("s1"), reopened, "get")
        expect_equal(await store.get_checkpoint("s1"), checkpoint, "the checkpoint")
        await expect_unchanged(
            store,
            SESS_OWNERSHIP_LOST,
            (
                ("the old owner's append", lambda: store.append("s1", created("s1", "e2"), owner_id="w1")),
                ("the old owner's close", lambda: store.close("s1", owner_id="w1")),
                ("the old owner's renewal", lambda: store.renew_lease("s1", "w1", lease_ms=1000)),
            ),
        )
        appended = await store.append("s1", created("s1", "e2"), owner_id="w2")
        expect_equal(appended.seq, 2, "the new owner appends after the stored events")
        closed_again = await store.close("s1", owner_id="w2")
        expect_equal(closed_again.record.closed_at, "2024-05-01T12:00:01.500Z", "a second close stamps anew")
        # A session its owner closed while its lease was live is reopened all the same: a
        # closed session takes no writes, so that lease fences nothing.
        await store.create("s2", owner_id="w1", lease_ms=60_000)
        await store.close("s2", owner_id="w1")
        taken = await store.reopen("s2", owner_id="w2", lease_ms=10)
        expect_equal(
            (taken.status, taken.lease), ("active", _lease("w2", 1510)), "a gracefully closed session"
        )


async def _reopen_active(open_store: StoreFactory) -> None:
    clock = ManualClock()
    async with open_store(clock) as store:
        await store.create("live", metadata={"m": 1}, owner_id="w1", lease_ms=1000)
        await store.create("bare")
        await expect_unchanged(
            store,
            SESS_OWNERSHIP_LOST,
            (("reopen over a live lease", lambda: store.reopen("live", owner_id="w2", lease_ms=1000)),),
        )
        own = await store.reopen("live", owner_id="w1", lease_ms=3000)
        expect_equal((own.status, own.lease), ("active", _lease("w1", 3000)), "the owner renews its own")
        expect_equal(own.metadata["m"], 1, "metadata is kept")
        nobody = await store.reopen("bare", owner_id="w2", lease_ms=1000)
        expect_equal(nobody.lease, _lease("w2", 1000), "a session without lease is taken")
        clock.advance(milliseconds=3000)
        lapsed = await store.reopen("live", owner_id="w2", lease_ms=1000)
        expect_equal(lapsed.lease, _lease("w2", 4000), "a lapsed lease is taken over")
        await expect_error(
            SESS_OWNERSHIP_LOST,
            store.append("live", created("live", "e1"), owner_id="w1"),
            "the former owner is fenced out",
        )


async def _reopen_refusals(open_store: StoreFactory) -> None:
    clock = ManualClock()
    async with open_store(clock) as store:
        await store.create("s1", metadata={"kind": "k"}, owner_id="w1", lease_ms=1000)
        clock.advance(milliseconds=1000)
        await store.recover_interrupted("s1", restored("s1"))
        await store.create("gone")
        await store.close("gone")
        await store.transition("gone", "closed", "archived")
        await expect_unchanged(
            store,
            SESS_NOT_FOUND,
            (("reopen of an unknown session", lambda: store.reopen("nope", owner_id="w2", lease_ms=10)),),
        )
        await expect_unchanged(
            store,
            SESS_CLOSED,
            (("reopen of an archived session", lambda: store.reopen("gone", owner_id="w2", lease_ms=10)),),
        )
        await expect_unchanged(
            store,
            SESS_RECOVERY_CONFLICT,
            (
                (
                    "other metadata",
                    lambda: store.reopen("s1", owner_id="w2", lease_ms=10, expected_metadata={"kind": "k"}),
                ),
            ),
        )
        bad: tuple[dict[str, Any], ...] = (
            {"owner_id": "", "lease_ms": 10},
            {"owner_id": "w" * 257, "lease_ms": 10},
            {"owner_id": None, "lease_ms": 10},
            {"owner_id": "w2", "lease_ms": 0},
            {"owner_id": "w2", "lease_ms": LEASE_MAX_MS + 1},
            {"owner_id": "w2", "lease_ms": True},
            {"owner_id": "w2", "lease_ms": 1.5},
            {"owner_id": "w2", "lease_ms": 10, "expected_metadata": [1]},
        )
        await expect_unchanged(
            store,
            SESS_INVALID_RECORD,
            tuple(
                (f"reopen with {arguments!r}", lambda arguments=arguments: store.reopen("s1", **arguments))
                for arguments in bad
            ),
        )


async def _reopen_is_once(open_store: StoreFactory) -> None:
    clock = ManualClock()
    async with open_store(clock) as store:
        for i in range(3):
            await store.create(f"s{i}", owner_id="w0", lease_ms=1)
        clock.advance(milliseconds=1)
        for i in range(3):
            await store.recover_interrupted(f"s{i}", restored(f"s{i}", f"r{i}"))
        won: list[SessionRecord] = []
        lost: list[tuple[str, str]] = []

        async def reopen(session_id: str, owner_id: str) -> None:
            try:
                won.append(await store.reopen(session_id, owner_id=owner_id, lease_ms=1000))
            except SessionStoreError as error:
                lost.append((session_id, error.code))

        async with trio.open_nursery() as nursery:
            for n in range(4):
                for i in range(3):
                    nursery.start_soon(reopen, f"s{i}", f"w{n + 1}")
        expect_equal(sorted(record.session_id for record in won), ["s0", "s1", "s2"], "one winner each")
        expect_equal(
            sorted(lost), sorted((f"s{i}", SESS_OWNERSHIP_LOST) for i in range(3) for _ in range(3)), "losers"
        )
        for record in won:
            stored = await store.get(record.session_id)
            expect_equal(stored, record, f"the winner's record of {record.session_id}")
            winner = "" if record.lease is None else record.lease.owner_id
            expect(winner != "", f"the winner of {record.session_id} holds the lease")
            for n in range(5):
                owner = f"w{n}"
                if owner != winner:
                    await expect_error(
                        SESS_OWNERSHIP_LOST,
                        store.append(
                            record.session_id,
                            created(record.session_id, f"x-{record.session_id}-{owner}"),
                            owner_id=owner,
                        ),
                        f"a losing reopener's append to {record.session_id}",
                    )
            await store.append(
                record.session_id,
                created(record.session_id, f"x-{record.session_id}-{winner}"),
                owner_id=winner,
            )


CHECKS: Final = (
    ConformanceCheck(
        "reopen_closed",
        "reopen makes a closed session active under the new owner's lease; the old owner is fenced out",
        _reopen_closed,
    ),
    ConformanceCheck(
        "reopen_active",
        "reopen of an active session takes the lease unless another owner's is live",
        _reopen_active,
    ),
    ConformanceCheck(
        "reopen_refusals",
        "reopen refuses unknown, archived, changed-metadata sessions and bad arguments, changing nothing",
        _reopen_refusals,
    ),
    ConformanceCheck(
        "reopen_is_once",
        "of concurrent reopeners of a closed session exactly one owner wins",
        _reopen_is_once,
    ),
)
