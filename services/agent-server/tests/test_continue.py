"""``session/continue`` and ``resume_interrupted``: an interrupted turn taken up again (issue #23).

The interrupted sessions here are made as a dead server leaves them: a runtime with
checkpoints writes a turn into the store under another owner's lease and is then simply
abandoned mid-turn (no terminal pair), and the store clock moves past that lease. The
process-level versions (a real server killed with SIGKILL) are in
``test_continue_processes.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

from agent_server.client import AcpClient, AcpClientError, JsonObject
from harness_kernel.models import FakeModel, ModelRequest, ScriptedTurn, ToolCall
from harness_kernel.policy import PermissionRequest, PermissionResolution, RulePermissionController
from harness_kernel.runtime import MinimalAgentRuntime, RunInput, RunStream
from harness_kernel.store import SqliteSessionStore
from harness_tools import ToolRegistry, create_echo_tool
from harness_workspace import AbortSignal

if TYPE_CHECKING:
    from conftest import ServerFactory

ECHO_THEN_DONE = (
    ScriptedTurn(tool_calls=[ToolCall("call-1", "echo", {"message": "hi"})]),
    ScriptedTurn(content="done"),
)
RESUMED = (
    ScriptedTurn(tool_calls=[ToolCall("call-9", "echo", {"message": "again"})]),
    ScriptedTurn(content="done"),
)
NO_OPERATOR = "no operator is connected: the turn was continued at server start"
LIVE_LEASE = "its owner's lease is live; looked at again in 1.5 s"


class Clock:
    """The store's and the server's clock; a test moves it past a dead owner's lease."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def __call__(self) -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=self.seconds)


class SessionModel:
    """One :class:`FakeModel` for every session of the server, so the test can read its requests."""

    def __init__(self, *turns: ScriptedTurn) -> None:
        self.fake = FakeModel(turns)

    def __call__(self) -> FakeModel:
        return self.fake

    def roles(self, call: int) -> list[tuple[str, str]]:
        request = self.fake.requests[call]
        assert isinstance(request, ModelRequest)
        return [(str(message.__struct_config__.tag), message.content) for message in request.messages]


class DeadOwner:
    """A server that died mid-turn: what it stored stays, its lease runs out."""

    def __init__(self, store: SqliteSessionStore, workspace: Path) -> None:
        self.store = store
        self.workspace = str(workspace.resolve())
        self.streams: list[RunStream] = []  # kept, never closed: nothing ends the turn

    async def interrupt(
        self,
        session_id: str,
        *,
        stop_at: str | None,
        script: tuple[ScriptedTurn, ...] = ECHO_THEN_DONE,
        principal: str = "default",
    ) -> None:
        """Run a turn until ``stop_at`` is delivered (``None``: to its end, permissions allowed)."""
        metadata: dict[str, object] = {
            "kind": "agent-session",
            "workspace": self.workspace,
            "modelName": "fake-model/v1",
            "principal": principal,
        }
        owner = f"connection-of-{session_id}"
        await self.store.create(session_id, metadata=metadata, owner_id=owner, lease_ms=1000)

        async def allow(request: PermissionRequest, signal: AbortSignal) -> PermissionResolution:
            return PermissionResolution("allow", "allowed")

        stream = MinimalAgentRuntime().run(
            RunInput(
                run_id=f"run-{session_id}",
                session_id=session_id,
                turn_id=f"turn-{session_id}",
                input="go",
                model="fake-model/v1",
                model_adapter=FakeModel(script),
                event_store=self.store.event_log(session_id, owner_id=owner),
                tools=ToolRegistry([create_echo_tool()]),
                permission=RulePermissionController(None, resolve=allow),
                checkpoints=True,
            )
        )
        self.streams.append(stream)
        async for event in stream:
            if event.type == stop_at:
                return


def _types(notes: list[JsonObject]) -> list[str]:
    return [note["params"]["event"]["type"] for note in notes]


async def _continue(client: AcpClient, session_id: str) -> JsonObject:
    return await client.request("session/continue", {"sessionId": session_id})


def _store_at(tmp_path: Path, clock: Clock) -> SqliteSessionStore:
    (tmp_path / "state").mkdir(exist_ok=True)
    return SqliteSessionStore(tmp_path / "state" / "continue.sqlite", now=clock)


async def test_continue_takes_up_the_turn_never_runs_its_open_call_again_and_then_follows_up(
    running: ServerFactory, tmp_path: Path
) -> None:
    clock = Clock()
    store = _store_at(tmp_path, clock)
    model = SessionModel(ScriptedTurn(content="continued"), ScriptedTurn(content="and a follow-up"))
    options: dict[str, Any] = {"db_path": None, "session_store": store, "now": clock}
    async with store, running(models={"fake-model/v1": model}, **options) as handle:
        dead = DeadOwner(store, running.workspace)
        # The call was stored (and may have had its effect); its result never was.
        await dead.interrupt("sess-1", stop_at="tool.call")
        stored = await store.size("sess-1")
        clock.seconds = 60
        async with handle.connect() as client:
            await client.initialize()
            result = await _continue(client, "sess-1")
            assert (result["status"], result["finalText"]) == ("completed", "continued")
            notes = client.drain_notifications()
            types = _types(notes)
            # Marked interrupted first (stored, not sent), then the continued turn, gapless.
            seqs = [note["params"]["seq"] for note in notes]
            assert seqs == list(range(stored + 1, stored + 1 + len(notes)))
            assert types[0] == "turn.resumed"
            assert notes[0]["params"]["event"]["data"]["interruptedCalls"] == 1
            assert "tool.call" not in types
            assert "permission.requested" not in types
            events = [note["params"]["event"] for note in notes]
            interrupted = next(event["data"] for event in events if event["type"] == "tool.result")
            assert (interrupted["ok"], interrupted["error"]["code"]) == (False, "TOOL_INTERRUPTED")
            assert types[-2:] == ["turn.completed", "agent.stopped"]
            # The model saw the turn as it was stored, the interrupted call's result included.
            assert [role for role, _ in model.roles(0)] == ["user", "assistant", "tool"]
            # The session is this connection's now: a follow-up sees the whole conversation.
            follow_up, _ = await client.prompt("sess-1", "what now?")
            assert follow_up["finalText"] == "and a follow-up"
            assert model.roles(1)[-2:] == [("assistant", "continued"), ("user", "what now?")]
            assert await client.request("session/close", {"sessionId": "sess-1"}) == {"closed": True}
            replayed = await running.replay_all(client, "sess-1")
        kinds = [note["event"]["type"] for note in replayed]
        assert [note["seq"] for note in replayed] == list(range(len(replayed)))
        assert kinds.count("session.restored") == 1
        assert kinds.count("tool.call") == 1
        assert kinds.count("turn.resumed") == 1
        assert kinds.count("agent.stopped") == 2


async def test_an_uncertain_model_request_is_not_sent_again_and_the_turn_fails(
    running: ServerFactory, tmp_path: Path
) -> None:
    clock = Clock()
    store = _store_at(tmp_path, clock)
    model = SessionModel(ScriptedTurn(content="a new turn"))
    options: dict[str, Any] = {"db_path": None, "session_store": store, "now": clock}
    async with store, running(models={"fake-model/v1": model}, **options) as handle:
        dead = DeadOwner(store, running.workspace)
        # The request was stored; whether the provider got it is unknown.
        await dead.interrupt("sess-2", stop_at="model.request")
        clock.seconds = 60
        async with handle.connect() as client:
            await client.initialize()
            result = await _continue(client, "sess-2")
            assert result["status"] == "failed"
            assert model.fake.requests == ()
            resumed = client.drain_notifications()[0]["params"]["event"]
            assert resumed["type"] == "turn.resumed"
            assert resumed["data"]["abandonedRequestId"]
            # The session goes on with a follow-up all the same.
            again, _ = await client.prompt("sess-2", "try again")
            assert again["finalText"] == "a new turn"


async def test_resend_uncertain_sends_the_unanswered_request_again_and_completes(
    running: ServerFactory, tmp_path: Path
) -> None:
    clock = Clock()
    store = _store_at(tmp_path, clock)
    model = SessionModel(ScriptedTurn(content="answered this time"))
    options: dict[str, Any] = {"db_path": None, "session_store": store, "now": clock}
    async with store, running(models={"fake-model/v1": model}, **options) as handle:
        dead = DeadOwner(store, running.workspace)
        await dead.interrupt("sess-3", stop_at="model.request")
        clock.seconds = 60
        async with handle.connect() as client:
            await client.initialize()
            params = {"sessionId": "sess-3", "resendUncertain": True}
            result = await client.request("session/continue", params)
            assert (result["status"], result["finalText"]) == ("completed", "answered this time")
            assert len(model.fake.requests) == 1
            events = [note["params"]["event"] for note in client.drain_notifications()]
            abandoned = events[0]["data"]["abandonedRequestId"]
            sent = next(event for event in events if event["type"] == "model.request")
            assert sent["data"]["requestId"] != abandoned


async def test_continue_is_refused_for_what_cannot_be_continued(
    running: ServerFactory, tmp_path: Path
) -> None:
    clock = Clock()
    store = _store_at(tmp_path, clock)
    model = SessionModel(ScriptedTurn(content="continued"))
    options: dict[str, Any] = {"db_path": None, "session_store": store, "now": clock}
    async with (
        store,
        running(models={"fake-model/v1": model}, **options) as handle,
        handle.connect() as client,
    ):
        await client.initialize()
        dead = DeadOwner(store, running.workspace)
        await dead.interrupt("sess-live", stop_at="tool.call")
        await dead.interrupt("sess-ended", stop_at=None)
        await dead.interrupt("sess-other", stop_at="tool.call", principal="someone-else")
        await dead.interrupt("sess-other-ended", stop_at=None, principal="someone-else")
        await store.create(
            "sess-empty", metadata=_metadata(running.workspace), owner_id="gone", lease_ms=1000
        )
        refusals: list[tuple[str, int, str | None]] = []

        async def refused(session_id: str) -> None:
            with pytest.raises(AcpClientError) as error:
                await _continue(client, session_id)
            refusals.append((session_id, error.value.code, error.value.data_code))

        await refused("sess-live")  # its owner's lease is live
        await refused("sess-ended")  # a live owner keeps even an ended conversation
        clock.seconds = 60
        await refused("sess-none")
        await refused("sess-other")  # to another principal it does not exist
        other_size = await store.size("sess-other-ended")
        await refused("sess-other-ended")  # nor can its ended conversation be taken up
        await refused("sess-empty")  # no turn at all
        assert refusals == [
            ("sess-live", -32013, "ACP_SESSION_NOT_RESTORABLE"),
            ("sess-ended", -32013, "ACP_SESSION_NOT_RESTORABLE"),
            ("sess-none", -32010, "ACP_SESSION_NOT_FOUND"),
            ("sess-other", -32010, "ACP_SESSION_NOT_FOUND"),
            ("sess-other-ended", -32010, "ACP_SESSION_NOT_FOUND"),
            ("sess-empty", -32023, "ACP_SESSION_NOT_CONTINUABLE"),
        ]
        # The other principal's session was not touched: no lease taken, nothing stored.
        other = await store.get("sess-other-ended")
        assert other.status == "active"
        assert other.lease is not None
        assert other.lease.owner_id == "connection-of-sess-other-ended"
        assert await store.size("sess-other-ended") == other_size
        assert (await store.get("sess-empty")).status == "closed"
        ended = await client.request("session/restore", {"sessionId": "sess-ended", "afterSeq": -1})
        assert ended["status"] == "completed"
        assert (await store.get("sess-ended")).status == "closed"
        client.drain_notifications()
        # A session whose last turn ended is taken up idle, without a turn: nothing is run.
        size = await store.size("sess-ended")
        taken = await _continue(client, "sess-ended")
        assert taken["status"] == "completed"
        assert await store.size("sess-ended") == size
        assert client.drain_notifications() == []
        assert (await store.get("sess-ended")).status == "active"
        # Continued once, the turn has ended: a second continue only takes the conversation up.
        assert (await _continue(client, "sess-live"))["status"] == "completed"
        await client.request("session/close", {"sessionId": "sess-live"})
        client.drain_notifications()
        size = await store.size("sess-live")
        again = await _continue(client, "sess-live")
        assert again["finalText"] == "continued"
        assert await store.size("sess-live") == size


def _metadata(workspace: Path) -> dict[str, object]:
    return {
        "kind": "agent-session",
        "workspace": str(workspace.resolve()),
        "modelName": "fake-model/v1",
        "principal": "default",
    }


async def test_without_persistence_nothing_can_be_continued(running: ServerFactory) -> None:
    async with running(db_path=None, persistence=False) as handle, handle.connect() as client:
        await client.initialize()
        with pytest.raises(AcpClientError) as refused:
            await _continue(client, "sess-any")
        assert refused.value.code == -32013


async def _wait_finished(store: SqliteSessionStore, session_id: str) -> None:
    """Wait until the continued turn has ended and the session's row is closed after it.

    The row alone does not tell: marking a session interrupted closes it too, for the moment
    before the continuation reopens it, so the last stored event must end a turn as well.
    """
    with trio.fail_after(30):
        while True:
            if (await store.get(session_id)).status == "closed":
                size = await store.size(session_id)
                if (await store.slice(session_id, size - 1, size))[-1].event.type == "agent.stopped":
                    return
            await trio.sleep(0.01)


async def _logged(caplog: pytest.LogCaptureFixture, message: str, *, times: int = 1) -> None:
    """Wait until the server has logged ``message`` ``times`` times (what it decided, not stored)."""
    with trio.fail_after(30):
        while [record.getMessage() for record in caplog.records].count(message) < times:  # noqa: ASYNC110
            await trio.sleep(0.01)


async def test_resume_interrupted_continues_each_interrupted_session_at_start_up_with_asks_denied(
    running: ServerFactory, tmp_path: Path
) -> None:
    clock = Clock()
    store = _store_at(tmp_path, clock)
    async with store:
        dead = DeadOwner(store, running.workspace)
        await dead.interrupt("sess-a", stop_at="tool.call")  # an open call: interrupted, never re-run
        await dead.interrupt("sess-b", stop_at="message.completed")  # before any request: a model round
        await dead.interrupt("sess-done", stop_at=None)  # nothing to continue
        clock.seconds = 60
        model: Callable[[], FakeModel] = lambda: FakeModel(RESUMED)  # noqa: E731
        options: dict[str, Any] = {"db_path": None, "session_store": store, "now": clock}
        async with running(models={"fake-model/v1": model}, resume_interrupted=True, **options):
            await _wait_finished(store, "sess-a")
            await _wait_finished(store, "sess-b")
        events = {
            session_id: [item.event for item in (await store.read(session_id, limit=1000)).events]
            for session_id in ("sess-a", "sess-b", "sess-done")
        }
    a_types = [event.type for event in events["sess-a"]]
    assert a_types.count("tool.call") == 1 + 1  # the dead owner's, and the continued turn's new call
    assert a_types.count("turn.resumed") == 1
    assert a_types[-2:] == ["turn.completed", "agent.stopped"]
    # No operator: the continued turn's own ask is denied at once, with a note saying why.
    for session_id in ("sess-a", "sess-b"):
        resolved = [e.data for e in events[session_id] if e.type == "permission.resolved"]
        last = resolved[-1]
        assert (getattr(last, "decision", None), getattr(last, "note", None)) == ("deny", NO_OPERATOR)
        assert getattr(events[session_id][-1].data, "status", None) == "completed"
    assert "turn.resumed" not in [event.type for event in events["sess-done"]]


async def test_resume_interrupted_waits_out_a_live_lease_and_leaves_a_renewed_one_alone(
    running: ServerFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent_server")
    clock = Clock()
    store = _store_at(tmp_path, clock)
    async with store:
        dead = DeadOwner(store, running.workspace)
        await dead.interrupt("sess-dead", stop_at="tool.call")
        await dead.interrupt("sess-alive", stop_at="tool.call")
        model: Callable[[], FakeModel] = lambda: FakeModel(RESUMED)  # noqa: E731
        options: dict[str, Any] = {"db_path": None, "session_store": store, "now": clock}
        async with running(models={"fake-model/v1": model}, resume_interrupted=True, **options):
            # Start-up found both leases live, expiring in a second.
            for session_id in ("sess-dead", "sess-alive"):
                await _logged(caplog, f"session {session_id}: {LIVE_LEASE}")
            # One owner is alive after all: it renews its lease. The other's runs out.
            await store.renew_lease("sess-alive", "connection-of-sess-alive", lease_ms=3_600_000)
            clock.seconds = 60
            await _wait_finished(store, "sess-dead")
            await _logged(caplog, "session sess-alive left alone: its lease was renewed or taken")
            alive = await store.get("sess-alive")
        dead_types = [item.event.type for item in (await store.read("sess-dead", limit=1000)).events]
        alive_types = [item.event.type for item in (await store.read("sess-alive", limit=1000)).events]
    assert "turn.resumed" in dead_types
    assert alive.status == "active"
    assert alive.lease is not None
    assert alive.lease.owner_id == "connection-of-sess-alive"
    assert "turn.resumed" not in alive_types
    assert "session.restored" not in alive_types


async def test_resume_interrupted_waits_again_for_a_lease_the_store_clock_still_holds_live(
    running: ServerFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent_server")
    clock = Clock()
    store = _store_at(tmp_path, clock)
    async with store:
        dead = DeadOwner(store, running.workspace)
        await dead.interrupt("sess-late", stop_at="tool.call")
        model: Callable[[], FakeModel] = lambda: FakeModel(RESUMED)  # noqa: E731
        options: dict[str, Any] = {"db_path": None, "session_store": store, "now": clock}
        async with running(models={"fake-model/v1": model}, resume_interrupted=True, **options):
            # The store clock stands still: when the server's timer runs out, the lease it
            # found is still live there, unchanged. The session is waited for again.
            await _logged(caplog, f"session sess-late: {LIVE_LEASE}", times=2)
            clock.seconds = 60
            await _wait_finished(store, "sess-late")
        types = [item.event.type for item in (await store.read("sess-late", limit=1000)).events]
    assert types.count("turn.resumed") == 1
    assert types[-2:] == ["turn.completed", "agent.stopped"]


async def test_a_conversation_whose_turn_ended_goes_on_after_a_restart(
    running: ServerFactory, tmp_path: Path
) -> None:
    clock = Clock()
    store = _store_at(tmp_path, clock)
    model = SessionModel(ScriptedTurn(content="a follow-up after the restart"))
    options: dict[str, Any] = {"db_path": None, "session_store": store, "now": clock}
    async with store, running(models={"fake-model/v1": model}, **options) as handle:
        dead = DeadOwner(store, running.workspace)
        # The first server finished the turn and died while the conversation was idle.
        await dead.interrupt("sess-idle", stop_at=None)
        clock.seconds = 60
        async with handle.connect() as client:
            await client.initialize()
            taken = await _continue(client, "sess-idle")
            assert taken["status"] == "completed"
            answer, _ = await client.prompt("sess-idle", "still there?")
            assert answer["finalText"] == "a follow-up after the restart"
            roles = model.roles(0)
            assert roles[0][0] == "user"
            assert roles[-1] == ("user", "still there?")
            assert len(roles) > 2  # the first turn's messages came with it
            assert await client.request("session/close", {"sessionId": "sess-idle"}) == {"closed": True}
            replayed = await running.replay_all(client, "sess-idle")
        kinds = [note["event"]["type"] for note in replayed]
        assert kinds.count("agent.stopped") == 2
        assert [note["seq"] for note in replayed] == list(range(len(replayed)))


class HeldStore(SqliteSessionStore):
    """Holds the start-up claim of an interrupted session (marking it) until the test lets it go."""

    def __init__(self, path: Path, clock: Clock) -> None:
        super().__init__(path, now=clock)
        self.claiming = trio.Event()
        self.release = trio.Event()

    async def recover_interrupted(self, *args: Any, **kwargs: Any) -> Any:
        self.claiming.set()
        await self.release.wait()
        return await super().recover_interrupted(*args, **kwargs)


async def test_a_shutdown_while_a_session_is_claimed_cancels_its_continued_turn(
    running: ServerFactory, tmp_path: Path
) -> None:
    clock = Clock()
    (tmp_path / "state").mkdir(exist_ok=True)
    store = HeldStore(tmp_path / "state" / "continue.sqlite", clock)
    async with store:
        dead = DeadOwner(store, running.workspace)
        await dead.interrupt("sess-a", stop_at="tool.call")
        clock.seconds = 60
        model: Callable[[], FakeModel] = lambda: FakeModel(RESUMED)  # noqa: E731
        options: dict[str, Any] = {"db_path": None, "session_store": store, "now": clock}
        async with running(models={"fake-model/v1": model}, resume_interrupted=True, **options) as handle:
            await store.claiming.wait()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(handle.aclose)
                # The shutdown has disconnected the start-up's connection and now waits for the
                # claim, which goes on only once every task is blocked.
                await trio.testing.wait_all_tasks_blocked()
                store.release.set()
        types = [item.event.type for item in (await store.read("sess-a", limit=1000)).events]
        row = await store.get("sess-a")
    continued = types[types.index("session.restored") :]
    # The disconnect came first: the continued turn ends canceled at once, never asking the model.
    assert "model.request" not in continued
    assert types[-2:] == ["turn.completed", "agent.stopped"]
    assert row.status == "closed"
