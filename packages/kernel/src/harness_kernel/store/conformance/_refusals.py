"""Conformance: every ``SESS_*`` code a store can raise on a running store, each changing nothing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from harness_kernel.store._ports import SessionStore
from harness_kernel.store._records import (
    SESS_CHECKPOINT_CONFLICT,
    SESS_CLOSED,
    SESS_EVENT_CONFLICT,
    SESS_INVALID_CURSOR,
    SESS_INVALID_RECORD,
    SESS_INVALID_TRANSITION,
    SESS_NOT_FOUND,
    SESS_OWNERSHIP_LOST,
    SESS_RECOVERY_CONFLICT,
)
from harness_kernel.store.conformance._support import (
    ConformanceCheck,
    ManualClock,
    StoreFactory,
    created,
    expect_unchanged,
    restored,
)

__all__ = ["CHECKS"]

Call = Callable[[], Awaitable[object]]


def _refusals(store: SessionStore) -> tuple[tuple[str, str, Call], ...]:
    """One refused call per code, against the sessions :func:`_every_code` sets up."""
    return (
        (SESS_NOT_FOUND, "append to a missing session", lambda: store.append("nope", created("nope", "x"))),
        (SESS_INVALID_RECORD, "an empty session id", lambda: store.create("")),
        (SESS_CLOSED, "append to a closed session", lambda: store.append("closed", created("closed", "x"))),
        (
            SESS_EVENT_CONFLICT,
            "a stored id, other content",
            lambda: store.append("live", created("live", "e0", "w")),
        ),
        (SESS_INVALID_CURSOR, "limit 0", lambda: store.read("live", limit=0)),
        (
            SESS_INVALID_TRANSITION,
            "active to archived",
            lambda: store.transition("live", "active", "archived"),
        ),
        (
            SESS_CHECKPOINT_CONFLICT,
            "a stale checkpoint revision",
            lambda: store.save_checkpoint("live", expected_revision=0, after_seq=1, payload=2),
        ),
        (
            SESS_RECOVERY_CONFLICT,
            "recovery under a live lease",
            lambda: store.recover_interrupted("live", restored("live")),
        ),
        (
            SESS_OWNERSHIP_LOST,
            "append by a stranger",
            lambda: store.append("live", created("live", "x"), owner_id="w2"),
        ),
    )


async def _every_code(open_store: StoreFactory) -> None:
    async with open_store(ManualClock()) as store:
        await store.create("live", metadata={"m": 1}, owner_id="w1", lease_ms=60_000)
        for i in range(3):
            await store.append("live", created("live", f"e{i}"), owner_id="w1")
        await store.save_checkpoint("live", expected_revision=0, after_seq=0, payload={"c": 1})
        await store.create("closed")
        await store.close("closed")
        for code, what, call in _refusals(store):
            await expect_unchanged(store, code, ((what, call),))


CHECKS: Final = (
    ConformanceCheck(
        "every_code",
        "each SESS_* code (but SESS_SCHEMA_VERSION, an opening error) leaves the store unchanged",
        _every_code,
    ),
)
