"""Conformance: ownership leases — taking, renewing, fencing writes, expiry by the store clock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

from harness_kernel.store._records import (
    LEASE_MAX_MS,
    SESS_INVALID_RECORD,
    SESS_NOT_FOUND,
    SESS_OWNERSHIP_LOST,
    SessionLease,
)
from harness_kernel.store.conformance._support import (
    START,
    ConformanceCheck,
    ManualClock,
    StoreFactory,
    created,
    expect_equal,
    expect_error,
    expect_unchanged,
)

__all__ = ["CHECKS"]


def _until(milliseconds: int) -> SessionLease:
    return SessionLease(owner_id="w1", expires_at=START + timedelta(milliseconds=milliseconds))


async def _create_takes_the_lease(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        record = await store.create("s1", metadata={"kind": "k"}, owner_id="w1", lease_ms=1500)
        expect_equal(record.lease, _until(1500), "the lease taken at create")
        expect_equal(
            record.metadata,
            {"kind": "k", "ownerId": "w1", "leaseExpiresAt": "2024-05-01T12:00:01.500Z"},
            "metadata holds the lease as stored",
        )
        expect_equal(await store.get("s1"), record, "get")
        expect_equal((await store.create("s2")).lease, None, "a session created without owner")


async def _fenced_writes(open_store: StoreFactory) -> None:
    clock = ManualClock()
    async with open_store(clock) as store:
        await store.create("s1", owner_id="w1", lease_ms=1000)
        await store.append("s1", created("s1", "e1"), owner_id="w1")
        await store.set_metadata("s1", {"x": 1}, owner_id="w1")
        expect_equal((await store.get("s1")).lease, _until(1000), "set_metadata keeps the lease")
        await expect_unchanged(
            store,
            SESS_OWNERSHIP_LOST,
            (
                ("append by another owner", lambda: store.append("s1", created("s1", "e2"), owner_id="w2")),
                ("close by another owner", lambda: store.close("s1", owner_id="w2")),
                ("set_metadata by another owner", lambda: store.set_metadata("s1", {}, owner_id="w2")),
            ),
        )
        # A repeat by a writer that lost its lease learns so before the duplicate rule.
        clock.advance(milliseconds=1000)
        await expect_unchanged(
            store,
            SESS_OWNERSHIP_LOST,
            (
                ("append as the lease ends", lambda: store.append("s1", created("s1", "e2"), owner_id="w1")),
                (
                    "a repeat as the lease ends",
                    lambda: store.append("s1", created("s1", "e1"), owner_id="w1"),
                ),
                ("close as the lease ends", lambda: store.close("s1", owner_id="w1")),
                (
                    "transition as the lease ends",
                    lambda: store.transition("s1", "active", "closed", owner_id="w1"),
                ),
            ),
        )
        unchanged = await store.transition("s1", "closed", "archived", owner_id="w1")
        expect_equal(unchanged.changed, False, "a transition that changes nothing checks no lease")
        await store.append("s1", created("s1", "e2"))
        expect_equal(await store.size("s1"), 2, "appends without owner_id are not fenced")


async def _renewal(open_store: StoreFactory) -> None:
    clock = ManualClock()
    async with open_store(clock) as store:
        await store.create("s1", owner_id="w1", lease_ms=1000)
        clock.advance(milliseconds=999)
        renewed = await store.renew_lease("s1", "w1", lease_ms=2000)
        expect_equal(renewed, _until(2999), "renewal runs from the store clock")
        expect_equal((await store.get("s1")).lease, renewed, "the renewed lease is stored")
        shorter = await store.renew_lease("s1", "w1", lease_ms=1)
        expect_equal(shorter, _until(1000), "a shorter lease_ms shortens the lease")
        clock.advance(milliseconds=2)
        await expect_unchanged(
            store,
            SESS_OWNERSHIP_LOST,
            (
                ("renewal of an expired lease", lambda: store.renew_lease("s1", "w1", lease_ms=1000)),
                ("renewal by another owner", lambda: store.renew_lease("s1", "w2", lease_ms=1000)),
            ),
        )
        await store.create("s2", owner_id="w1", lease_ms=5000)
        await store.create("s3")
        await store.close("s2", owner_id="w1")
        await expect_unchanged(
            store,
            SESS_OWNERSHIP_LOST,
            (
                (
                    "renewal by another owner of a live lease",
                    lambda: store.renew_lease("s2", "w2", lease_ms=10),
                ),
                ("renewal of a closed session", lambda: store.renew_lease("s2", "w1", lease_ms=1000)),
                ("renewal of a session without lease", lambda: store.renew_lease("s3", "w1", lease_ms=1000)),
            ),
        )
        await expect_error(SESS_NOT_FOUND, store.renew_lease("nope", "w1", lease_ms=10), "missing session")


async def _lease_arguments(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("s1", owner_id="w1", lease_ms=1000)
        bad_lengths: tuple[Any, ...] = (0, -1, LEASE_MAX_MS + 1, True, 1.5, "10", None)
        calls = [
            (f"renew_lease lease_ms={bad!r}", lambda bad=bad: store.renew_lease("s1", "w1", lease_ms=bad))
            for bad in bad_lengths
        ]
        calls += [
            (f"create lease_ms={bad!r}", lambda bad=bad: store.create("s2", owner_id="w1", lease_ms=bad))
            for bad in bad_lengths
        ]
        calls += [
            ("owner_id without lease_ms", lambda: store.create("s2", owner_id="w1")),
            ("lease_ms without owner_id", lambda: store.create("s2", lease_ms=1000)),
            (
                "owner_id with lease keys in the metadata",
                lambda: store.create("s2", metadata={"ownerId": "w1"}, owner_id="w1", lease_ms=1000),
            ),
        ]
        await expect_unchanged(store, SESS_INVALID_RECORD, tuple(calls))
        longest = await store.create("s3", owner_id="w1", lease_ms=LEASE_MAX_MS)
        expect_equal(longest.lease, _until(LEASE_MAX_MS), "the longest lease")


async def _takeover(open_store: StoreFactory) -> None:
    clock = ManualClock()
    async with open_store(clock) as store:
        await store.create("s1", metadata={"kind": "k"}, owner_id="w1", lease_ms=1000)
        await expect_unchanged(
            store,
            SESS_OWNERSHIP_LOST,
            (("reopen over a live lease", lambda: store.create("s1", owner_id="w2", lease_ms=1000)),),
        )
        own = await store.create("s1", owner_id="w1", lease_ms=3000)
        expect_equal(own.lease, _until(3000), "the owner reopens and renews")
        clock.advance(milliseconds=3000)
        taken = await store.create("s1", task_id="t", owner_id="w2", lease_ms=1000)
        expect_equal(
            taken.lease, SessionLease(owner_id="w2", expires_at=START + timedelta(seconds=4)), "takeover"
        )
        expect_equal(
            (taken.task_id, taken.metadata["kind"]), ("t", "k"), "reopen keeps metadata, fills task_id"
        )
        await expect_error(
            SESS_OWNERSHIP_LOST,
            store.append("s1", created("s1", "e1"), owner_id="w1"),
            "the former owner is fenced out",
        )
        await store.close("s1", owner_id="w2")
        await expect_unchanged(
            store,
            SESS_OWNERSHIP_LOST,
            (("reopen of a closed session", lambda: store.create("s1", owner_id="w2", lease_ms=1000)),),
        )


async def _legacy_metadata_lease(open_store: StoreFactory) -> None:
    clock = ManualClock()
    async with open_store(clock) as store:
        expiry = "2024-05-01T14:00:01+02:00"
        record = await store.create("s1", metadata={"ownerId": "w1", "leaseExpiresAt": expiry, "k": 1})
        expect_equal(record.lease, _until(1000), "a lease named in metadata is read with its offset")
        expect_equal(record.metadata["leaseExpiresAt"], expiry, "and kept as written")
        await store.append("s1", created("s1", "e1"), owner_id="w1")
        renewed = await store.set_metadata("s1", {"ownerId": "w1", "leaseExpiresAt": "2024-05-01T12:00:05Z"})
        expect_equal(renewed.lease, _until(5000), "set_metadata naming the lease writes it")
        odd = await store.create("s2", metadata={"ownerId": "w1", "leaseExpiresAt": "tomorrow"})
        expect_equal(odd.lease, SessionLease(owner_id="w1", expires_at=None), "an unreadable expiry")
        await expect_error(
            SESS_OWNERSHIP_LOST, store.append("s2", created("s2", "e2"), owner_id="w1"), "it is never live"
        )
        naive = await store.create("s3", metadata={"ownerId": "w1", "leaseExpiresAt": "2030-01-01T00:00:00"})
        expect_equal(naive.lease, SessionLease(owner_id="w1", expires_at=None), "an expiry without offset")
        for owner in ("", 5, None):
            nobody = await store.create(f"s-{owner!r}", metadata={"ownerId": owner, "leaseExpiresAt": expiry})
            expect_equal(nobody.lease, None, f"ownerId {owner!r} is no owner")
        taken = await store.create("s2", owner_id="w2", lease_ms=10)
        expect_equal(
            taken.lease, SessionLease(owner_id="w2", expires_at=START + timedelta(milliseconds=10)), ""
        )


CHECKS: Final = (
    ConformanceCheck(
        "create_takes_the_lease",
        "create(owner_id=, lease_ms=) stores ownerId and leaseExpiresAt (ms, Z) with the session",
        _create_takes_the_lease,
    ),
    ConformanceCheck(
        "fenced_writes",
        "writes given owner_id need that owner's lease, strictly later than the store clock",
        _fenced_writes,
    ),
    ConformanceCheck(
        "renewal",
        "renew_lease extends only the holder's live lease of an active session",
        _renewal,
    ),
    ConformanceCheck(
        "lease_arguments",
        "lease_ms is an int in 1..86 400 000, owner_id and lease_ms go together: SESS_INVALID_RECORD",
        _lease_arguments,
    ),
    ConformanceCheck(
        "takeover",
        "create(owner_id=) of an existing session takes the lease unless another owner's is live",
        _takeover,
    ),
    ConformanceCheck(
        "legacy_metadata_lease",
        "ownerId and leaseExpiresAt written in metadata are a lease, read as stored (legacy path)",
        _legacy_metadata_lease,
    ),
)
