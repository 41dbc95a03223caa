"""``session/restore`` replays stored events and recovers abandoned sessions (spec §8)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from agent_server.client import AcpClientError
from harness_kernel.store import SqliteSessionStore

if TYPE_CHECKING:
    from conftest import ServerFactory


async def test_restore_marks_an_abandoned_session_interrupted(running: ServerFactory, tmp_path: Path) -> None:
    ticks = [0.0]

    def clock() -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=ticks[0])

    (tmp_path / "state").mkdir()
    store = SqliteSessionStore(tmp_path / "state" / "s.sqlite", now=clock)
    async with store, running(db_path=None, session_store=store, now=clock) as handle:
        async with handle.connect() as client:
            await client.initialize()
            session_id = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
            with pytest.raises(AcpClientError) as live:
                await client.request("session/restore", {"sessionId": session_id, "afterSeq": -1})
            assert live.value.code == -32013
        # The created session was canceled at disconnect and its row closed without events.
        async with handle.connect() as client:
            await client.initialize()
            replay = await client.request("session/restore", {"sessionId": session_id, "afterSeq": -1})
            assert replay["status"] == "completed"
            assert replay["replayedEvents"] == 0
            with pytest.raises(AcpClientError) as beyond:
                await client.request("session/restore", {"sessionId": session_id, "afterSeq": 5})
            assert beyond.value.code == -32602
            with pytest.raises(AcpClientError) as missing:
                await client.request("session/restore", {"sessionId": "sess-none", "afterSeq": -1})
            assert missing.value.code == -32010
        # An active row whose owner's lease expired mid-run is recovered as interrupted.
        created = await store.create(
            "sess-orphan",
            metadata={
                "kind": "agent-session",
                "workspace": str((tmp_path / "root" / "ws").resolve()),
                "modelName": "fake-model/v1",
                "ownerId": "connection-gone",
                "principal": "default",
                "leaseExpiresAt": "2026-01-01T00:00:01.000Z",
            },
        )
        assert created.status == "active"
        ticks[0] = 60
        async with handle.connect() as client:
            await client.initialize()
            replay = await client.request("session/restore", {"sessionId": "sess-orphan", "afterSeq": -1})
            assert replay["status"] == "interrupted"
            notes = client.drain_notifications()
            assert [n["params"]["event"]["type"] for n in notes] == ["session.restored"]
            assert notes[0]["params"]["event"]["actor"] == "agent-server"
            # Restored sessions are replay-only.
            with pytest.raises(AcpClientError) as replay_only:
                await client.request("session/cancel", {"sessionId": "sess-orphan"})
            assert replay_only.value.code == -32010
