"""``SqliteSessionStore.delete_closed``: the retention step, in a real SQLite file."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness_kernel.events import Event, create_event
from harness_kernel.store import (
    SESS_INVALID_CURSOR,
    SESS_INVALID_RECORD,
    SessionStoreError,
    SqliteSessionStore,
)

CUTOFF = datetime(2026, 6, 1, tzinfo=UTC)


def _event(session_id: str, index: int) -> Event:
    return create_event(
        "session.created",
        {"sessionId": session_id},
        event_id=f"evt-{session_id}-{index}",
        at="2026-01-01T00:00:00Z",
    )


# Each session: None stays active; otherwise (days before the cutoff, archived?). Negative
# days are after the cutoff.
_SESSIONS = st.lists(
    st.one_of(st.none(), st.tuples(st.integers(-30, 30), st.booleans())),
    max_size=12,
)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=_SESSIONS)
async def test_exactly_the_sessions_closed_before_the_cutoff_go_with_their_events(
    tmp_path_factory: pytest.TempPathFactory, plan: list[tuple[int, bool] | None]
) -> None:
    path = tmp_path_factory.mktemp("retention") / "s.db"
    expected_kept: set[str] = set()
    async with SqliteSessionStore(path) as store:
        for index, entry in enumerate(plan):
            session_id = f"sess-{index}"
            await store.create(session_id)
            for seq in range(index % 3):
                await store.append(session_id, _event(session_id, seq))
            if entry is None:
                expected_kept.add(session_id)
                continue
            days, archived = entry
            closed_at = CUTOFF - timedelta(days=days, seconds=1 if days >= 0 else -1)
            await store.close(session_id, at=closed_at.isoformat())
            if archived:
                await store.transition(session_id, "closed", "archived")
            if days < 0:
                expected_kept.add(session_id)
        deleted = await store.delete_closed(closed_before=CUTOFF, limit=1000)
        kept = {listing.record.session_id for listing in await store.list()}
        assert kept == expected_kept
        assert set(deleted) == {f"sess-{i}" for i in range(len(plan))} - expected_kept
        for session_id in deleted:
            with pytest.raises(SessionStoreError):
                await store.get(session_id)
    with sqlite3.connect(path) as database:
        orphans = database.execute(
            "SELECT COUNT(*) FROM events WHERE session_id NOT IN (SELECT session_id FROM sessions)"
        ).fetchone()[0]
    assert orphans == 0


async def test_deletion_goes_in_batches_oldest_first(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        for day in range(5):
            await store.create(f"sess-{day}")
            await store.close(f"sess-{day}", at=(CUTOFF - timedelta(days=10 - day)).isoformat())
        assert await store.delete_closed(closed_before=CUTOFF, limit=2) == ("sess-0", "sess-1")
        assert await store.delete_closed(closed_before=CUTOFF, limit=2) == ("sess-2", "sess-3")
        assert await store.delete_closed(closed_before=CUTOFF, limit=2) == ("sess-4",)
        assert await store.delete_closed(closed_before=CUTOFF, limit=2) == ()


async def test_a_closed_at_that_is_not_an_iso_time_is_kept(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        await store.create("sess-odd")
        await store.close("sess-odd", at="last tuesday")
        await store.create("sess-naive")
        await store.close("sess-naive", at="2000-01-01T00:00:00")  # no offset: not judged
        assert await store.delete_closed(closed_before=CUTOFF) == ()
        assert len(await store.list()) == 2


async def test_bad_arguments_are_typed_errors_that_delete_nothing(tmp_path: Path) -> None:
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        await store.create("sess-a")
        await store.close("sess-a", at="2000-01-01T00:00:00Z")
        for limit in (0, 1001, True, 1.5):
            with pytest.raises(SessionStoreError) as bad_limit:
                await store.delete_closed(closed_before=CUTOFF, limit=limit)  # pyright: ignore[reportArgumentType]
            assert bad_limit.value.code == SESS_INVALID_CURSOR
        with pytest.raises(SessionStoreError) as bad_cutoff:
            await store.delete_closed(closed_before="2030-01-01")  # pyright: ignore[reportArgumentType]
        assert bad_cutoff.value.code == SESS_INVALID_RECORD
        assert len(await store.list()) == 1
