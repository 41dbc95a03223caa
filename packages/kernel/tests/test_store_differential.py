"""MemorySessionStore and SqliteSessionStore agree, operation by operation, on random programs.

Both stores run the same random sequence of operations — valid and invalid, with owners,
leases and a clock that moves — and every result, every error code and the final contents
must be equal. The conformance suite pins chosen cases; this finds the unchosen ones.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness_kernel.events import EventSchemaError, create_event
from harness_kernel.store import MemorySessionStore, SessionStore, SessionStoreError, SqliteSessionStore
from harness_kernel.store.conformance import START, ManualClock
from harness_kernel.store.conformance._support import restored, snapshot

Operation = Callable[[SessionStore, ManualClock], Awaitable[object]]

_SESSIONS = st.sampled_from(["a", "b", "c"])
_OWNERS = st.sampled_from([None, None, None, "w1", "w2"])
_EVENT_IDS = st.sampled_from([f"e{i}" for i in range(8)])


def _event(session_id: str, event_id: str, variant: int) -> Any:
    return create_event(
        "session.created",
        {"sessionId": session_id, "workspace": f"w{variant}"},
        event_id=event_id,
        at="2024-05-01T12:00:00.000Z",
    )


@st.composite
def _operation(draw: st.DrawFn) -> tuple[str, Operation]:
    sid = draw(_SESSIONS)
    owner = draw(_OWNERS)
    kind = draw(
        st.sampled_from(
            [
                "create",
                "create",
                "append",
                "append",
                "append",
                "append",
                "append_many",
                "read",
                "audit",
                "close",
                "archive",
                "metadata",
                "renew",
                "checkpoint",
                "recover",
                "reopen",
                "delete",
                "advance",
                "slice",
            ]
        )
    )
    number = draw(st.integers(-2, 4))
    lease_ms = draw(st.sampled_from([None, 0, 1, 500, 2000]))
    event_id = draw(_EVENT_IDS)
    variant = draw(st.integers(0, 1))
    operations: dict[str, Operation] = {
        "create": lambda store, _: store.create(
            sid, metadata={"n": number}, owner_id=owner, lease_ms=lease_ms if owner else None
        ),
        "append": lambda store, _: store.append(
            sid, _event(draw_session(sid, variant), event_id, variant), owner_id=owner
        ),
        # A batch of 0 to 3 events; the second repeats the first's id (a repeat, or a conflict).
        "append_many": lambda store, _: store.append_many(
            sid,
            [
                _event(draw_session(sid, (variant + i) % 2), event_id if i < 2 else f"{event_id}-{i}", i % 2)
                for i in range(max(0, number) % 4)
            ],
            owner_id=owner,
        ),
        "read": lambda store, _: store.read(sid, after_seq=number, limit=max(0, number + 1)),
        "audit": lambda store, _: store.read_audit_events(after_global_seq=number, limit=variant + 1),
        "close": lambda store, _: store.close(sid, owner_id=owner),
        "archive": lambda store, _: store.transition(sid, "closed", "archived", owner_id=owner),
        "metadata": lambda store, _: store.set_metadata(
            sid,
            {"ownerId": "w1", "leaseExpiresAt": "2024-05-01T12:00:01Z"} if variant else {"m": number},
            owner_id=owner,
        ),
        "renew": lambda store, _: store.renew_lease(sid, owner or "w1", lease_ms=lease_ms or 0),
        "checkpoint": lambda store, _: store.save_checkpoint(
            sid, expected_revision=variant, after_seq=number, payload={"v": variant}
        ),
        "recover": lambda store, _: store.recover_interrupted(
            sid, restored(sid, f"r-{event_id}", f"n{variant}")
        ),
        "reopen": lambda store, _: store.reopen(
            sid,
            owner_id=owner or "w2",
            lease_ms=lease_ms or 0,
            expected_metadata={"n": number} if variant else None,
        ),
        "delete": lambda store, _: store.delete_closed(
            closed_before=START + timedelta(seconds=number), limit=variant + 1
        ),
        "advance": _advance(number),
        "slice": lambda store, _: store.slice(sid, max(0, number), None if variant else number + 2),
    }
    return f"{kind} {sid} owner={owner} n={number} lease={lease_ms} id={event_id} v={variant}", operations[
        kind
    ]


def draw_session(sid: str, variant: int) -> str:
    """The session an appended event names: its own, or (variant 1 of session c) another one."""
    return "a" if sid == "c" and variant else sid


def _advance(number: int) -> Operation:
    async def advance(_store: SessionStore, clock: ManualClock) -> object:
        clock.advance(milliseconds=700 * (number + 2))
        return None

    return advance


async def _pages(store: SessionStore) -> list[object]:
    """Every session's events, read in one page, then one page of one event at a time."""
    pages: list[object] = []
    for listing in await store.list():
        pages.append(await store.read(listing.record.session_id, limit=1000))
        after = -1
        while True:
            page = await store.read(listing.record.session_id, after_seq=after, limit=1)
            pages.append(page)
            after = page.next_after_seq
            if not page.has_more:
                break
    return pages


async def _outcome(operation: Operation, store: SessionStore, clock: ManualClock) -> object:
    try:
        return ("ok", await operation(store, clock))
    except SessionStoreError as error:
        return ("error", error.code, str(error))
    except (EventSchemaError, TypeError) as error:
        return ("raised", type(error).__name__)


@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=st.lists(_operation(), min_size=5, max_size=40))
async def test_memory_and_sqlite_agree_on_every_operation(
    tmp_path_factory: pytest.TempPathFactory, program: list[tuple[str, Operation]]
) -> None:
    path = tmp_path_factory.mktemp("differential") / "s.db"
    memory_clock, sqlite_clock = ManualClock(), ManualClock()
    async with (
        MemorySessionStore(now=memory_clock) as memory,
        SqliteSessionStore(path, now=sqlite_clock) as sqlite,
    ):
        for store in (memory, sqlite):
            await store.create("a")
            for index in range(3):
                await store.append("a", _event("a", f"p{index}", 0))
            await store.create("b", owner_id="w1", lease_ms=2000)
            await store.create("c", metadata={"ownerId": "w2", "leaseExpiresAt": "2024-05-01T12:00:01Z"})
        for step, (what, operation) in enumerate(program):
            in_memory = await _outcome(operation, memory, memory_clock)
            in_sqlite = await _outcome(operation, sqlite, sqlite_clock)
            assert in_memory == in_sqlite, f"step {step}: {what}"
        assert await snapshot(memory) == await snapshot(sqlite)
        assert await _pages(memory) == await _pages(sqlite)
