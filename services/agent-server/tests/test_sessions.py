"""Sessions end to end: streamed stored events, timers, persistence failures, disconnect and shutdown."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio

from agent_server.client import (
    AcpClient,
    AcpClientError,
    ConnectionClosedError,
    JsonObject,
    initialize_params,
)
from harness_kernel.models import ModelEvent, ModelRequest, TextDeltaFrame
from harness_kernel.store import SqliteSessionStore

if TYPE_CHECKING:
    from conftest import ServerFactory


async def _new_session(client: AcpClient) -> str:
    await client.initialize()
    return (await client.request("session/new", {"workspace": "ws"}))["sessionId"]


async def _next_event(client: AcpClient, event_type: str) -> JsonObject:
    async for note in client.notifications:
        if note["params"]["event"]["type"] == event_type:
            return note
    raise AssertionError(f"no {event_type} event")


async def test_session_with_a_tool_call_streams_stored_events_in_order(running: ServerFactory) -> None:
    async with running() as handle, handle.connect() as client:
        hello = await client.initialize()
        assert hello["capabilities"] == {"streaming": True, "permissioning": True, "sessions": True}
        assert hello["models"] == ["fake-model/v1"]
        session_id = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
        result, notes = await client.prompt(session_id, "go")
        assert result["status"] == "completed"
        assert result["finalText"] == "done"
        assert result["events"] == []
        usage = result["usage"]
        assert usage["totalTokens"] == usage["promptTokens"] + usage["completionTokens"]
        assert [note["params"]["seq"] for note in notes] == list(range(len(notes)))
        types = [note["params"]["event"]["type"] for note in notes]
        # The §6.5 events, in their order ...
        assert [kind for kind in types if not kind.startswith(("turn.", "message.", "runtime."))] == [
            "session.created",
            "agent.started",
            "model.request",
            "model.response",
            "tool.call",
            "policy.decision",
            "permission.requested",
            "permission.resolved",
            "tool.result",
            "model.request",
            "model.response",
            "agent.stopped",
        ]
        # ... interleaved with the runtime's turn and message events (decision 034) and its
        # checkpoints at the turn, each request and a response that asks for tools (issue #23).
        assert types == [
            "session.created",
            "agent.started",
            "turn.started",
            "message.completed",
            "runtime.checkpoint",
            "runtime.checkpoint",
            "model.request",
            "model.response",
            "message.completed",
            "runtime.checkpoint",
            "tool.call",
            "policy.decision",
            "permission.requested",
            "permission.resolved",
            "tool.result",
            "message.completed",
            "runtime.checkpoint",
            "model.request",
            "message.delta",
            "model.response",
            "message.completed",
            "turn.completed",
            "agent.stopped",
        ]
        # The session stays open for a follow-up (issue #23) until it is closed.
        assert await client.request("session/close", {"sessionId": session_id}) == {"closed": True}
        replay = await client.request("session/restore", {"sessionId": session_id, "afterSeq": -1})
        assert replay["status"] == "completed"
        assert replay["replayedEvents"] == len(notes)
        replayed = client.drain_notifications()
        assert [note["params"] for note in replayed] == [note["params"] for note in notes]
        with pytest.raises(AcpClientError) as again:
            await client.request("session/prompt", {"sessionId": session_id, "content": "again"})
        assert again.value.code == -32011


async def test_without_a_store_seq_counts_from_zero_and_restore_is_refused(running: ServerFactory) -> None:
    async with running(db_path=None, persistence=False) as handle, handle.connect() as client:
        hello = await client.initialize()
        assert hello["capabilities"]["sessions"] is False
        session_id = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
        result, notes = await client.prompt(session_id, "go")
        assert result["status"] == "completed"
        assert [note["params"]["seq"] for note in notes] == list(range(len(notes)))
        with pytest.raises(AcpClientError) as refused:
            await client.request("session/restore", {"sessionId": session_id, "afterSeq": -1})
        assert refused.value.code == -32013


class FailingStore(SqliteSessionStore):
    """A store whose appends fail after the first commit (``session.created``, admission, checkpoint)."""

    commits = 0

    async def append_many(self, session_id: str, events: Any, *, owner_id: str | None = None) -> Any:
        self.commits += 1
        if self.commits > 1:
            raise OSError("disk full")
        return await super().append_many(session_id, events, owner_id=owner_id)


async def test_a_store_failing_mid_run_answers_internal_error_and_keeps_the_row_active(
    running: ServerFactory, tmp_path: Path
) -> None:
    (tmp_path / "state").mkdir()
    store = FailingStore(tmp_path / "state" / "failing.sqlite")
    async with store, running(db_path=None, session_store=store) as handle:
        async with handle.connect() as client:
            session_id = await _new_session(client)
            with pytest.raises(AcpClientError) as failed:
                await client.request("session/prompt", {"sessionId": session_id, "content": "go"})
            assert failed.value.code == -32603
            assert failed.value.data_code is None
            assert [n["params"]["seq"] for n in client.drain_notifications()] == [0, 1, 2, 3, 4]
        record = await store.get(session_id)
        assert record.status == "active"
        assert await store.size(session_id) == 5


class LeaseFailingStore(SqliteSessionStore):
    """A store whose lease refreshes always fail."""

    async def renew_lease(self, session_id: str, owner_id: str, *, lease_ms: int) -> Any:
        raise OSError("lease write failed")


async def test_a_failed_lease_refresh_aborts_the_run_as_a_persistence_failure(
    running: ServerFactory, tmp_path: Path
) -> None:
    (tmp_path / "state").mkdir()
    store = LeaseFailingStore(tmp_path / "state" / "lease.sqlite")
    async with store, running(db_path=None, session_store=store, session_lease_ms=1000) as handle:
        async with handle.connect() as client:
            session_id = await _new_session(client)
            # The run waits for an operator answer that never comes; the refresh fails meanwhile.
            with pytest.raises(AcpClientError) as failed:
                await client.request("session/prompt", {"sessionId": session_id, "content": "go"})
            assert (failed.value.code, failed.value.data_code) == (-32603, None)
        assert (await store.get(session_id)).status == "active"


async def test_an_unprompted_session_is_canceled_by_the_idle_timer(running: ServerFactory) -> None:
    async with (
        running.session_store() as store,
        running(db_path=None, session_store=store, created_session_timeout_ms=20) as handle,
        handle.connect() as client,
    ):
        session_id = await _new_session(client)
        await running.wait_for_closed_row(store, session_id)
        assert await client.request("session/cancel", {"sessionId": session_id}) == {"canceled": False}
        with pytest.raises(AcpClientError) as already:
            await client.request("session/prompt", {"sessionId": session_id, "content": "go"})
        assert already.value.code == -32011
        assert client.drain_notifications() == []


async def test_an_unanswered_permission_times_out_as_a_denial(running: ServerFactory) -> None:
    async with running(permission_timeout_ms=50) as handle, handle.connect() as client:
        session_id = await _new_session(client)
        result = await client.request("session/prompt", {"sessionId": session_id, "content": "go"})
        assert result["status"] == "completed"
        events = [note["params"]["event"] for note in client.drain_notifications()]
        requested = next(event for event in events if event["type"] == "permission.requested")
        resolved = next(event for event in events if event["type"] == "permission.resolved")
        assert (resolved["data"]["decision"], resolved["data"]["note"]) == (
            "deny",
            "permission request timed out",
        )
        answer = {"sessionId": session_id, "permissionId": requested["data"]["permissionId"]}
        with pytest.raises(AcpClientError) as late:
            await client.request("permission/respond", {**answer, "decision": "allow"})
        assert (late.value.code, late.value.data_code) == (-32021, "ACP_PERMISSION_RESOLVED")


async def test_cancel_denies_the_pending_permission_and_ends_the_run(running: ServerFactory) -> None:
    async with running() as handle, handle.connect() as client:
        session_id = await _new_session(client)
        outcome: list[AcpClientError] = []

        async def prompt() -> None:
            # The aborted run raises, so the prompt is answered with an error frame (§5.3).
            with pytest.raises(AcpClientError) as canceled:
                await client.request("session/prompt", {"sessionId": session_id, "content": "go"})
            outcome.append(canceled.value)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(prompt)
            await _next_event(client, "permission.requested")
            assert await client.request("session/cancel", {"sessionId": session_id}) == {"canceled": True}
        resolved = await _next_event(client, "permission.resolved")
        # The kernel sees the abort and settles the wait itself, always as a denial.
        assert resolved["params"]["event"]["data"]["decision"] == "deny"
        assert outcome[0].code == -32603
        assert await client.request("session/cancel", {"sessionId": session_id}) == {"canceled": False}


async def test_shutdown_closes_with_1001_and_sends_no_response_after_disconnect(
    running: ServerFactory, tmp_path: Path
) -> None:
    (tmp_path / "state").mkdir()
    store = SqliteSessionStore(tmp_path / "state" / "shutdown.sqlite")
    async with store, running(db_path=None, session_store=store) as handle:
        async with handle.connect() as client:
            session_id = await _new_session(client)
            failures: list[BaseException] = []

            async def prompt() -> None:
                try:
                    await client.request("session/prompt", {"sessionId": session_id, "content": "go"})
                except ConnectionClosedError as error:
                    failures.append(error)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt)
                await _next_event(client, "permission.requested")
                await handle.aclose()
            assert await client.wait_closed() == 1001
            assert client.close_reason == "server shutting down"
            # Disconnect semantics: the in-flight prompt never gets its response.
            assert len(failures) == 1
            assert [n["params"]["event"]["type"] for n in client.drain_notifications()] == []
        # The run was aborted and its row closed; every committed event is still stored.
        assert (await store.get(session_id)).status == "closed"
        assert await store.size(session_id) >= 7


async def test_a_client_vanishing_mid_prompt_loses_no_event_and_leaves_other_connections_working(
    running: ServerFactory, tmp_path: Path
) -> None:
    (tmp_path / "state").mkdir()
    store = SqliteSessionStore(tmp_path / "state" / "vanish.sqlite")
    async with store, running(db_path=None, session_store=store) as handle, handle.connect() as other:
        other_id = await _new_session(other)
        outcome: list[JsonObject] = []

        async def other_prompt() -> None:
            params = {"sessionId": other_id, "content": "go"}
            outcome.append(await other.request("session/prompt", params))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other_prompt)
            other_requested = await _next_event(other, "permission.requested")
            async with running.raw_websocket(handle) as raw:
                await raw.send_request(1, "initialize", initialize_params())
                assert "result" in await raw.next_message()
                await raw.send_request(2, "session/new", {"workspace": "ws"})
                vanished_id = (await raw.next_message())["result"]["sessionId"]
                await raw.send_request(3, "session/prompt", {"sessionId": vanished_id, "content": "go"})
                seen: list[JsonObject] = []
                while not seen or seen[-1]["event"]["type"] != "permission.requested":
                    seen.append((await raw.next_message())["params"])
            # The TCP stream ended without a close frame while the run waited for an operator.
            await running.wait_for_closed_row(store, vanished_id)
            permission_id = other_requested["params"]["event"]["data"]["permissionId"]
            answer = {"sessionId": other_id, "permissionId": permission_id, "decision": "allow"}
            assert await other.request("permission/respond", answer) == {"accepted": True}
        assert outcome[0]["status"] == "completed"
        other_notes = [other_requested, *other.drain_notifications()]
        # permission.requested is the thirteenth event of the run (seq 12), the rest follow it gaplessly.
        assert [n["params"]["seq"] for n in other_notes] == list(range(12, 12 + len(other_notes)))

        async with handle.connect() as fresh:
            await fresh.initialize()
            replayed = await running.replay_all(fresh, vanished_id)
        stored = await store.read(vanished_id, limit=1000)
        assert [note["seq"] for note in replayed] == list(range(await store.size(vanished_id)))
        assert [note["seq"] for note in replayed] == [item.seq for item in stored.events]
        event_ids = [note["event"]["eventId"] for note in replayed]
        assert len(set(event_ids)) == len(event_ids)
        # What the client saw before it vanished is exactly the start of the stored stream.
        assert replayed[: len(seen)] == seen
        types = [note["event"]["type"] for note in replayed]
        assert types[len(seen)] == "permission.resolved"
        assert replayed[len(seen)]["event"]["data"]["decision"] == "deny"
        assert types[-1] == "agent.stopped"


class SecretFlood:
    """A model whose one text delta is valid but cannot be redacted.

    A ``message.delta`` may hold at most 1 MiB characters. Redacting ``token=a`` gives
    ``token=[REDACTED]``, so 1 MiB of such pairs outgrows the field, and the redacted event no
    longer passes its schema: ``harness_kernel.events.redact_event`` raises.
    """

    def __init__(self) -> None:
        self.pulled_after_failure = False

    def __call__(self) -> SecretFlood:
        return self

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield TextDeltaFrame("token=a " * (1_048_576 // 8))
        # A poisoned run never pulls again.
        self.pulled_after_failure = True
        yield TextDeltaFrame("more")


async def test_a_failed_redaction_stores_an_error_event_instead_and_aborts_the_run(
    running: ServerFactory, tmp_path: Path
) -> None:
    model = SecretFlood()
    (tmp_path / "state").mkdir()
    store = SqliteSessionStore(tmp_path / "state" / "redaction.sqlite")
    options: dict[str, Any] = {"db_path": None, "session_store": store, "models": {"fake-model/v1": model}}
    async with store, running(**options) as handle:
        async with handle.connect() as client:
            session_id = await _new_session(client)
            with pytest.raises(AcpClientError) as failed:
                await client.request("session/prompt", {"sessionId": session_id, "content": "go"})
            assert (failed.value.code, failed.value.data_code) == (-32603, None)
            # The run stopped at the refused event: no further model pull, no terminal pair.
            assert model.pulled_after_failure is False
            notes = [note["params"] for note in client.drain_notifications()]
            assert [note["seq"] for note in notes] == list(range(len(notes)))
            # The unredacted event is neither stored nor sent; its replacement ends the stream.
            types = [note["event"]["type"] for note in notes]
            assert types == [
                "session.created",
                "agent.started",
                "turn.started",
                "message.completed",
                "runtime.checkpoint",
                "runtime.checkpoint",
                "model.request",
                "error",
            ]
            replacement = notes[-1]["event"]
            assert replacement["actor"] == "agent-server"
            assert replacement["data"]["code"] == "EVENT_REDACTION_FAILED"
            assert replacement["data"]["retryable"] is False
            assert "token=a" not in json.dumps(notes)
            with pytest.raises(AcpClientError) as again:
                await client.request("session/prompt", {"sessionId": session_id, "content": "go"})
            assert again.value.code == -32011
            replayed = await running.replay_all(client, session_id)
        assert replayed == notes
        assert (await store.get(session_id)).status == "closed"


@pytest.mark.parametrize("how", ["session/cancel", "disconnect", "shutdown"])
async def test_every_way_to_stop_a_running_prompt_stores_exactly_one_canceled_terminal_pair(
    running: ServerFactory, tmp_path: Path, how: str
) -> None:
    """The runtime's cancel path: one durable outcome, and the pending ask answered before it."""
    (tmp_path / "state").mkdir()
    store = SqliteSessionStore(tmp_path / "state" / f"stop-{how.replace('/', '-')}.sqlite")
    async with store, running(db_path=None, session_store=store) as handle:
        async with handle.connect() as client:
            session_id = await _new_session(client)

            async def prompt() -> None:
                with pytest.raises((AcpClientError, ConnectionClosedError)):
                    await client.request("session/prompt", {"sessionId": session_id, "content": "go"})

            async with trio.open_nursery() as nursery:
                nursery.start_soon(prompt)
                await _next_event(client, "permission.requested")
                if how == "session/cancel":
                    assert await client.request("session/cancel", {"sessionId": session_id}) == {
                        "canceled": True
                    }
                elif how == "disconnect":
                    await client.aclose()
                else:
                    await handle.aclose()
        if how != "shutdown":
            await running.wait_for_closed_row(store, session_id)
        page = await store.read(session_id, limit=1000)
    events = [item.event for item in page.events]
    types = [event.type for event in events]
    assert types.count("turn.completed") == 1
    assert types.count("agent.stopped") == 1
    assert types[-2:] == ["turn.completed", "agent.stopped"]
    assert getattr(events[-1].data, "status", None) == "canceled"
    requested = [getattr(e.data, "permission_id", None) for e in events if e.type == "permission.requested"]
    resolved = [getattr(e.data, "permission_id", None) for e in events if e.type == "permission.resolved"]
    assert requested
    assert requested == resolved
    resolution = next(event for event in events if event.type == "permission.resolved")
    assert getattr(resolution.data, "decision", None) == "deny"
