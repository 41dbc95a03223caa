"""Sessions are conversations (issue #23): follow-up turns, steering, idle sessions, closing."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
import trio

from agent_server.client import AcpClient, AcpClientError, JsonObject
from harness_kernel.models import (
    AssistantMessage,
    FakeModel,
    ModelEvent,
    ModelRequest,
    ScriptedTurn,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from harness_kernel.runtime import ContextPolicy, RunStream, RunTerminalError, SteeringClosedError
from harness_kernel.store import SqliteSessionStore

if TYPE_CHECKING:
    from conftest import ServerFactory

ECHO_THEN_DONE = (
    ScriptedTurn(tool_calls=[ToolCall("call-1", "echo", {"message": "hi"})]),
    ScriptedTurn(content="done"),
)


class SessionModel:
    """One :class:`FakeModel` for the server's sessions, so a test can read every request it got."""

    def __init__(self, *turns: ScriptedTurn) -> None:
        self.fake = FakeModel(turns)

    def __call__(self) -> FakeModel:
        return self.fake

    def messages(self, call: int) -> list[tuple[str, str]]:
        """The (role, content) of each message of the model's request number ``call`` (0-based)."""
        return _roles(self.fake.requests[call])


def _roles(request: object) -> list[tuple[str, str]]:
    """The (role, content) of each message of a model request."""
    assert isinstance(request, ModelRequest)
    return [(str(message.__struct_config__.tag), message.content) for message in request.messages]


class GatedModel:
    """A model whose first answer waits, mid-stream, until the test opens the gate."""

    def __init__(self, *turns: ScriptedTurn) -> None:
        self.fake = FakeModel(turns)
        self.streaming = trio.Event()
        self.gate = trio.Event()

    def __call__(self) -> GatedModel:
        return self

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        first = not self.streaming.is_set()
        # FakeModel.stream is an async generator: closed here, not left to the garbage collector.
        inner = cast("AsyncGenerator[ModelEvent]", self.fake.stream(request))
        async with aclosing(inner) as frames:
            async for frame in frames:
                if first:
                    first = False
                    self.streaming.set()
                    await self.gate.wait()
                yield frame


async def _new_session(client: AcpClient) -> str:
    await client.initialize()
    return (await client.request("session/new", {"workspace": "ws"}))["sessionId"]


async def _next_event(client: AcpClient, event_type: str) -> JsonObject:
    async for note in client.notifications:
        if note["params"]["event"]["type"] == event_type:
            return note
    raise AssertionError(f"no {event_type} event")


async def _prompt(client: AcpClient, session_id: str, results: list[JsonObject]) -> None:
    """``session/prompt`` alone: the test reads the notifications (and answers any permission) itself."""
    results.append(await client.request("session/prompt", {"sessionId": session_id, "content": "go"}))


def _types(notes: list[JsonObject]) -> list[str]:
    return [note["params"]["event"]["type"] for note in notes]


async def test_a_follow_up_prompt_continues_the_conversation_with_the_first_turns_messages(
    running: ServerFactory,
) -> None:
    model = SessionModel(*ECHO_THEN_DONE, ScriptedTurn(content="second answer"))
    async with running(models={"fake-model/v1": model}) as handle, handle.connect() as client:
        session_id = await _new_session(client)
        first, first_notes = await client.prompt(session_id, "go")
        assert (first["status"], first["finalText"]) == ("completed", "done")
        second, second_notes = await client.prompt(session_id, "and now?")
        assert (second["status"], second["finalText"]) == ("completed", "second answer")
        # The follow-up's request holds the whole first turn, then the new prompt.
        assert model.messages(2) == [
            ("user", "go"),
            ("assistant", ""),
            ("tool", model.messages(1)[2][1]),
            ("assistant", "done"),
            ("user", "and now?"),
        ]
        request = model.fake.requests[2]
        assert isinstance(request, ModelRequest)
        assert isinstance(request.messages[1], AssistantMessage)
        assert isinstance(request.messages[2], ToolMessage)
        assert isinstance(request.messages[4], UserMessage)
        # One session, one gapless stream: the follow-up's events go on where the first's stopped.
        seqs = [note["params"]["seq"] for note in first_notes + second_notes]
        assert seqs == list(range(len(seqs)))
        assert "session.created" not in _types(second_notes)
        assert _types(second_notes)[:2] == ["agent.started", "turn.started"]
        assert _types(second_notes)[-2:] == ["turn.completed", "agent.stopped"]
        turns = {
            note["params"]["event"]["data"]["turnId"]
            for note in first_notes + second_notes
            if note["params"]["event"]["type"] == "turn.started"
        }
        assert len(turns) == 2
        # Usage is the session's: the second answer counts both turns.
        assert second["usage"]["promptTokens"] > first["usage"]["promptTokens"]
        events = [note["params"]["event"] for note in second_notes]
        completed = next(event["data"] for event in events if event["type"] == "turn.completed")
        assert second["usage"]["totalTokens"] == completed["usage"]["totalTokens"]


async def test_a_prompt_beside_a_running_turn_is_refused_and_the_turn_goes_on(running: ServerFactory) -> None:
    async with running() as handle, handle.connect() as client:
        session_id = await _new_session(client)
        results: list[JsonObject] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_prompt, client, session_id, results)
            asked = (await _next_event(client, "permission.requested"))["params"]["event"]["data"]
            with pytest.raises(AcpClientError) as busy:
                await client.request("session/prompt", {"sessionId": session_id, "content": "too"})
            assert (busy.value.code, busy.value.data_code) == (-32011, "ACP_SESSION_ALREADY_RUN")
            assert "running" in busy.value.message
            permission = {"sessionId": session_id, "permissionId": asked["permissionId"], "decision": "allow"}
            await client.request("permission/respond", permission)
        assert results[0]["status"] == "completed"


async def test_an_idle_session_is_closed_by_the_idle_timeout(running: ServerFactory, tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    store = SqliteSessionStore(tmp_path / "state" / "idle.sqlite")
    options: dict[str, Any] = {"db_path": None, "session_store": store, "created_session_timeout_ms": 1000}
    async with store, running(**options) as handle, handle.connect() as client:
        session_id = await _new_session(client)
        await client.prompt(session_id, "go")
        # The timer restarted when the turn ended; the session waits, then is finished.
        assert (await store.get(session_id)).status == "active"
        await running.wait_for_closed_row(store, session_id)
        with pytest.raises(AcpClientError) as finished:
            await client.request("session/prompt", {"sessionId": session_id, "content": "again"})
        assert finished.value.code == -32011
        assert "finished" in finished.value.message
        assert await client.request("session/cancel", {"sessionId": session_id}) == {"canceled": False}


async def test_an_idle_session_keeps_its_lease_and_a_disconnect_closes_it(
    running: ServerFactory, tmp_path: Path
) -> None:
    (tmp_path / "state").mkdir()
    store = SqliteSessionStore(tmp_path / "state" / "lease.sqlite")
    async with store, running(db_path=None, session_store=store, session_lease_ms=1000) as handle:
        async with handle.connect() as client:
            session_id = await _new_session(client)
            await client.prompt(session_id, "go")
            granted = (await store.get(session_id)).lease
            assert granted is not None
            assert granted.expires_at is not None
            # Watched until the store's clock is past the granted lease: only a refresh keeps it live.
            with trio.fail_after(30):
                while True:
                    record = await store.get(session_id)
                    now = await store.current_time()
                    assert record.status == "active"
                    assert record.lease is not None
                    if now > granted.expires_at and record.lease.live_at(now):
                        break
                    await trio.sleep(0.05)
            assert record.lease.expires_at is not None
            assert record.lease.expires_at > granted.expires_at
        await running.wait_for_closed_row(store, session_id)


async def test_a_canceled_turn_leaves_the_session_idle_for_a_follow_up(running: ServerFactory) -> None:
    async with running() as handle, handle.connect() as client:
        session_id = await _new_session(client)

        async def prompt() -> None:
            with pytest.raises(AcpClientError) as canceled:
                await client.request("session/prompt", {"sessionId": session_id, "content": "go"})
            assert canceled.value.code == -32603

        async with trio.open_nursery() as nursery:
            nursery.start_soon(prompt)
            await _next_event(client, "permission.requested")
            assert await client.request("session/cancel", {"sessionId": session_id}) == {"canceled": True}
        client.drain_notifications()
        # Nothing left to cancel; the conversation goes on.
        assert await client.request("session/cancel", {"sessionId": session_id}) == {"canceled": False}
        result, notes = await client.prompt(session_id, "go on")
        assert result["status"] == "completed"
        assert _types(notes)[-1] == "agent.stopped"


async def test_closing_a_running_session_cancels_its_turn_and_closes_the_row(
    running: ServerFactory, tmp_path: Path
) -> None:
    (tmp_path / "state").mkdir()
    store = SqliteSessionStore(tmp_path / "state" / "close.sqlite")
    async with store, running(db_path=None, session_store=store) as handle, handle.connect() as client:
        session_id = await _new_session(client)
        errors: list[AcpClientError] = []

        async def prompt() -> None:
            with pytest.raises(AcpClientError) as canceled:
                await client.request("session/prompt", {"sessionId": session_id, "content": "go"})
            errors.append(canceled.value)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(prompt)
            await _next_event(client, "permission.requested")
            assert await client.request("session/close", {"sessionId": session_id}) == {"closed": True}
            # Answered once the session has finished: its row is closed.
            assert (await store.get(session_id)).status == "closed"
        assert errors[0].code == -32603
        assert await client.request("session/close", {"sessionId": session_id}) == {"closed": False}
        events = [item.event for item in (await store.read(session_id, limit=1000)).events]
        assert [event.type for event in events][-2:] == ["turn.completed", "agent.stopped"]
        assert getattr(events[-1].data, "status", None) == "canceled"
        created = await _fresh_session(client)
        assert await client.request("session/close", {"sessionId": created}) == {"closed": True}
        assert (await store.get(created)).status == "closed"


async def _fresh_session(client: AcpClient) -> str:
    return (await client.request("session/new", {"workspace": "ws"}))["sessionId"]


async def test_steering_during_the_model_phase_is_stored_then_answered_then_applied(
    running: ServerFactory,
) -> None:
    model = GatedModel(ScriptedTurn(content="first answer"), ScriptedTurn(content="steered answer"))
    async with running(models={"fake-model/v1": model}) as handle, handle.connect() as client:
        session_id = await _new_session(client)
        results: list[JsonObject] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_prompt, client, session_id, results)
            await model.streaming.wait()
            steered = await client.request("session/steer", {"sessionId": session_id, "content": "be brief"})
            # The steering.queued notification came first, with the same message id.
            queued = [
                note["params"]["event"]
                for note in client.drain_notifications()
                if note["params"]["event"]["type"] == "steering.queued"
            ]
            assert [event["data"]["messageId"] for event in queued] == [steered["messageId"]]
            assert queued[0]["data"]["content"] == "be brief"
            model.gate.set()
        # The answer in flight stood; the steering made one more round, applied before its request.
        assert results[0]["finalText"] == "steered answer"
        requests = model.fake.requests
        assert len(requests) == 2
        assert _roles(requests[1])[-2:] == [
            ("assistant", "first answer"),
            ("user", "be brief"),
        ]


async def test_steering_during_a_permission_ask_reaches_the_next_request(running: ServerFactory) -> None:
    model = SessionModel(*ECHO_THEN_DONE)
    async with running(models={"fake-model/v1": model}) as handle, handle.connect() as client:
        session_id = await _new_session(client)
        results: list[JsonObject] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_prompt, client, session_id, results)
            asked = (await _next_event(client, "permission.requested"))["params"]
            steered = {"messageId": await client.steer(session_id, "use hi")}
            queued = await client.notifications.receive()
            # Stored after the ask, and on the wire before the steer's answer.
            assert queued["params"]["event"]["type"] == "steering.queued"
            assert queued["params"]["seq"] == asked["seq"] + 1
            assert queued["params"]["event"]["data"]["messageId"] == steered["messageId"]
            permission = {"sessionId": session_id, "permissionId": asked["event"]["data"]["permissionId"]}
            await client.request("permission/respond", {**permission, "decision": "allow"})
        assert results[0]["status"] == "completed"
        # Applied at the next request boundary, in that request's batch, right before it.
        types = _types(client.drain_notifications())
        assert types[:4] == ["permission.resolved", "tool.result", "message.completed", "steering.applied"]
        assert types[4:6] == ["runtime.checkpoint", "model.request"]
        assert model.messages(1)[-1] == ("user", "use hi")
        assert model.messages(1)[-2][0] == "tool"


async def test_steering_is_refused_without_a_running_turn_and_for_invalid_text(
    running: ServerFactory,
) -> None:
    async with running() as handle, handle.connect() as client:
        session_id = await _new_session(client)
        steer = {"sessionId": session_id, "content": "hello"}
        with pytest.raises(AcpClientError) as created:
            await client.request("session/steer", steer)
        assert (created.value.code, created.value.data_code) == (-32019, "ACP_NO_RUNNING_TURN")
        await client.prompt(session_id, "go")
        with pytest.raises(AcpClientError) as idle:
            await client.request("session/steer", steer)
        assert idle.value.code == -32019
        with pytest.raises(AcpClientError) as unknown:
            await client.request("session/steer", {**steer, "sessionId": "sess-none"})
        assert unknown.value.code == -32010
        for content in ("", "x" * (256 * 1024 + 1)):
            with pytest.raises(AcpClientError) as invalid:
                await client.request("session/steer", {**steer, "content": content})
            assert invalid.value.code == -32602
        with pytest.raises(AcpClientError) as extra:
            await client.request("session/steer", {**steer, "priority": 1})
        assert extra.value.code == -32602


@pytest.mark.parametrize("refusal", [RunTerminalError("run-1", "completing"), SteeringClosedError("run-1")])
async def test_steering_a_turn_that_is_ending_is_a_typed_refusal(
    running: ServerFactory, monkeypatch: pytest.MonkeyPatch, refusal: Exception
) -> None:
    """The runtime refuses a steer once cancellation was requested or the turn completes; the
    window is too short to hit from a client, so the runtime's answer is forced here."""

    async def ending(self: RunStream, text: str) -> str:
        raise refusal

    monkeypatch.setattr(RunStream, "steer", ending)
    async with running() as handle, handle.connect() as client:
        session_id = await _new_session(client)
        results: list[JsonObject] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_prompt, client, session_id, results)
            asked = (await _next_event(client, "permission.requested"))["params"]["event"]["data"]
            with pytest.raises(AcpClientError) as refused:
                await client.request("session/steer", {"sessionId": session_id, "content": "late"})
            assert (refused.value.code, refused.value.data_code) == (-32022, "ACP_STEERING_REFUSED")
            permission = {"sessionId": session_id, "permissionId": asked["permissionId"], "decision": "allow"}
            await client.request("permission/respond", permission)
        assert results[0]["status"] == "completed"


async def test_the_servers_context_policy_accounts_every_request_and_compacts_a_long_conversation(
    running: ServerFactory,
) -> None:
    model = SessionModel(
        ScriptedTurn(content="noted"),
        ScriptedTurn(content="Summary: the user sent a long text of a's."),
        ScriptedTurn(content="second answer"),
    )
    # The first request (about 1.8 kB) stays under the threshold; the second (3.3 kB) does not.
    policy = ContextPolicy(window_tokens=100_000, threshold_tokens=2_500, tail_messages=1)
    options: dict[str, Any] = {"models": {"fake-model/v1": model}, "context_policy": policy}
    async with running(**options) as handle, handle.connect() as client:
        session_id = await _new_session(client)
        first, first_notes = await client.prompt(session_id, "a" * 1500)
        assert first["finalText"] == "noted"
        assert "context.compacted" not in _types(first_notes)
        second, second_notes = await client.prompt(session_id, "b" * 1500)
        assert second["finalText"] == "second answer"
        types = _types(second_notes)
        assert types.count("context.compacted") == 1
        assert types.index("context.compacted") < types.index("model.request")
        accounted = [
            note["params"]["event"]["data"]
            for note in first_notes + second_notes
            if note["params"]["event"]["type"] == "context.accounted"
        ]
        assert len(accounted) == 2
        assert accounted[0]["tokens"] < 2_500
        # The request after the compaction: the summary, then the tail (the new prompt).
        assert [role for role, _ in model.messages(2)] == ["user", "user"]
        assert model.messages(2)[0][1].endswith("Summary: the user sent a long text of a's.")
        assert model.messages(2)[1] == ("user", "b" * 1500)
