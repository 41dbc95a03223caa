"""Status transitions, metadata, checkpoints and crash recovery."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import trio

from harness_kernel.events import create_event
from harness_kernel.store import (
    SESS_CLOSED,
    SESS_INVALID_RECORD,
    SESS_OWNERSHIP_LOST,
    SESS_RECOVERY_CONFLICT,
    RecoverInterruptedResult,
    SessionStoreError,
    SqliteSessionStore,
)
from harness_kernel.store._records import (
    SESS_CHECKPOINT_CONFLICT,
    SESS_EVENT_CONFLICT,
    SESS_INVALID_TRANSITION,
)
from harness_kernel.store.conformance._support import restored

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def lease(expires: datetime) -> dict[str, object]:
    return {"ownerId": "w1", "leaseExpiresAt": expires.isoformat()}


async def test_transitions_follow_the_allowed_graph(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        await store.create("s1")
        same = await store.transition("s1", "active", "active")
        assert not same.changed
        with pytest.raises(SessionStoreError) as caught:
            await store.transition("s1", "active", "archived")
        assert caught.value.code == SESS_INVALID_TRANSITION
        closed = await store.close("s1", at="2024-06-01T00:00:00Z")
        assert closed.changed
        assert (closed.record.status, closed.record.closed_at) == ("closed", "2024-06-01T00:00:00Z")
        assert not (await store.close("s1")).changed  # current differs from expected
        archived = await store.transition("s1", "closed", "archived", at="2030-01-01T00:00:00Z")
        assert archived.changed
        assert archived.record.closed_at == "2024-06-01T00:00:00Z"
        with pytest.raises(SessionStoreError) as caught:
            await store.transition("s1", "archived", "active")
        assert caught.value.code == SESS_INVALID_TRANSITION


async def test_ownership_is_checked_only_when_a_transition_would_change(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db", now=lambda: NOW) as store:
        await store.create("s1", metadata=lease(NOW - timedelta(seconds=1)))
        assert not (await store.transition("s1", "closed", "archived", owner_id="w1")).changed
        with pytest.raises(SessionStoreError) as caught:
            await store.close("s1", owner_id="w1")
        assert caught.value.code == SESS_OWNERSHIP_LOST


async def test_set_metadata_needs_an_active_session_and_the_lease(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db", now=lambda: NOW) as store:
        await store.create("s1", metadata=lease(NOW + timedelta(minutes=1)))
        updated = await store.set_metadata(
            "s1", {**lease(NOW + timedelta(minutes=2)), "x": [1]}, owner_id="w1"
        )
        assert updated.metadata["x"] == [1]
        with pytest.raises(SessionStoreError) as caught:
            await store.set_metadata("s1", {}, owner_id="w2")
        assert caught.value.code == SESS_OWNERSHIP_LOST
        await store.close("s1")
        with pytest.raises(SessionStoreError) as caught:
            await store.set_metadata("s1", {})
        assert caught.value.code == SESS_CLOSED


async def test_checkpoints_advance_by_revision_and_repeat_idempotently(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        await store.create("s1")
        assert await store.get_checkpoint("s1") is None
        for i in range(3):
            await store.append("s1", create_event("session.created", {"sessionId": "s1"}, event_id=f"e{i}"))
        first = await store.save_checkpoint("s1", expected_revision=0, after_seq=1, payload={"n": 1})
        assert (first.revision, first.after_seq, first.payload) == (1, 1, {"n": 1})
        again = await store.save_checkpoint("s1", expected_revision=0, after_seq=1, payload={"n": 1})
        assert again == first
        assert await store.get_checkpoint("s1") == first
        for kwargs, code in (
            ({"expected_revision": 0, "after_seq": 2, "payload": {"n": 2}}, SESS_CHECKPOINT_CONFLICT),
            ({"expected_revision": 1, "after_seq": 0, "payload": {"n": 2}}, SESS_CHECKPOINT_CONFLICT),
            ({"expected_revision": 1, "after_seq": 3, "payload": {"n": 2}}, SESS_INVALID_RECORD),
        ):
            with pytest.raises(SessionStoreError) as caught:
                await store.save_checkpoint("s1", **kwargs)  # pyright: ignore[reportArgumentType]
            assert caught.value.code == code
        second = await store.save_checkpoint("s1", expected_revision=1, after_seq=2, payload=[1, 2])
        assert second.revision == 2
        await store.close("s1")
        with pytest.raises(SessionStoreError) as caught:
            await store.save_checkpoint("s1", expected_revision=2, after_seq=2, payload=[1, 2])
        assert caught.value.code == SESS_CLOSED


async def test_recovery_needs_an_expired_lease_and_matching_metadata(tmp_path: Path) -> None:
    clock = [NOW]
    async with SqliteSessionStore(tmp_path / "s.db", now=lambda: clock[0]) as store:
        await store.create("s1", metadata=lease(NOW + timedelta(seconds=5)))
        await store.create("s2")
        for session in ("s1", "s2"):
            with pytest.raises(SessionStoreError) as caught:
                await store.recover_interrupted(session, restored(session, f"r-{session}"))
            assert caught.value.code == SESS_RECOVERY_CONFLICT
        clock[0] = NOW + timedelta(seconds=5)
        with pytest.raises(SessionStoreError) as caught:
            await store.recover_interrupted("s1", restored("s1"), expected_metadata={"other": 1})
        assert caught.value.code == SESS_RECOVERY_CONFLICT
        with pytest.raises(SessionStoreError) as caught:
            await store.recover_interrupted("s1", restored("s2"))
        assert caught.value.code == SESS_INVALID_RECORD
        result = await store.recover_interrupted(
            "s1", restored("s1"), expected_metadata=lease(NOW + timedelta(seconds=5)), closed_at="T"
        )
        assert result.recovered
        assert (result.record.status, result.record.closed_at) == ("closed", "T")
        assert result.event is not None
        assert result.event.event.event_id == "r1"
        repeat = await store.recover_interrupted("s1", restored("s1"))
        assert not repeat.recovered
        assert repeat.event == result.event
        with pytest.raises(SessionStoreError) as caught:
            await store.recover_interrupted("s1", restored("s1", note="different"))
        assert caught.value.code == SESS_EVENT_CONFLICT


async def test_recovery_happens_exactly_once_across_two_stores_on_one_file(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with (
        SqliteSessionStore(path, now=lambda: NOW) as first,
        SqliteSessionStore(path, now=lambda: NOW) as second,
    ):
        for i in range(5):
            await first.create(f"s{i}", metadata=lease(NOW - timedelta(seconds=1)))
        results: list[RecoverInterruptedResult] = []

        async def recover(store: SqliteSessionStore, session: str) -> None:
            results.append(await store.recover_interrupted(session, restored(session, f"r-{session}")))

        async with trio.open_nursery() as nursery:
            for i in range(5):
                nursery.start_soon(recover, first, f"s{i}")
                nursery.start_soon(recover, second, f"s{i}")
        for i in range(5):
            mine = [r for r in results if r.record.session_id == f"s{i}"]
            assert sorted(r.recovered for r in mine) == [False, True]
            assert all(r.event is not None and r.event.seq == 0 for r in mine)
            assert await first.size(f"s{i}") == 1
