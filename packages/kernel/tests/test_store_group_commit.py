"""Group commit: concurrent writes share one durable commit, and each keeps its own outcome."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import trio

import harness_kernel.store._sqlite as sqlite_store
from harness_kernel.events import create_event
from harness_kernel.store import SESS_NOT_FOUND, SessionStoreError, SqliteSessionStore


def _event(session_id: str, number: int) -> object:
    return create_event("session.created", {"sessionId": session_id}, event_id=f"e-{session_id}-{number}")


async def test_concurrent_appends_share_commits_and_a_failing_one_fails_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes: list[int] = []
    original = sqlite_store._group_transaction  # pyright: ignore[reportPrivateUsage]

    def recording(connection: sqlite3.Connection, batch: list[object]) -> None:
        sizes.append(len(batch))
        original(connection, batch)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlite_store, "_group_transaction", recording)
    path = tmp_path / "s.db"
    outcomes: dict[str, object] = {}
    async with SqliteSessionStore(path) as store:
        for index in range(20):
            await store.create(f"s{index}")

        async def append(session_id: str, number: int) -> None:
            try:
                stored = await store.append(session_id, _event(session_id, number))  # type: ignore[arg-type]
            except SessionStoreError as error:
                outcomes[f"{session_id}/{number}"] = error.code
            else:
                outcomes[f"{session_id}/{number}"] = stored.seq

        async with trio.open_nursery() as nursery:
            for number in range(3):
                for index in range(20):
                    nursery.start_soon(append, f"s{index}", number)
                # A write that fails inside a batch: its session does not exist.
                nursery.start_soon(append, "missing", number)
        for index in range(20):
            assert await store.size(f"s{index}") == 3
    # Writes were grouped: fewer commits than writes, and at least one commit held several.
    assert sum(sizes) == 20 * 3 + 3 + 20
    assert max(sizes) > 1
    assert [outcomes[f"missing/{number}"] for number in range(3)] == [SESS_NOT_FOUND] * 3
    assert sorted(outcomes[f"s0/{number}"] for number in range(3)) == [0, 1, 2]  # type: ignore[type-var]
    # Everything acknowledged is in the file, read back by another connection.
    reader = sqlite3.connect(path)
    try:
        assert reader.execute("SELECT count(*) FROM events").fetchone()[0] == 60
    finally:
        reader.close()


async def test_a_write_to_a_closed_store_fails_and_stores_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteSessionStore(path) as store:
        await store.create("s1")
        await store.aclose()
        with pytest.raises(SessionStoreError):
            await store.append("s1", _event("s1", 0))  # type: ignore[arg-type]
    async with SqliteSessionStore(path) as reopened:
        assert await reopened.size("s1") == 0
