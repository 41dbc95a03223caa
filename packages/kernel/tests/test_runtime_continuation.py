"""Runtime checkpoints and restart-safe continuation (issue #23 §3).

A "crash" here stops a run where a process could die: the consumer stops pulling (the run
is never closed, so no terminal pair is written), or the store refuses every write from
some moment on. A fresh runtime, another owner, then continues the turn from the stored
events through ``MinimalAgentRuntime.continue_session``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import trio
from runtime_helpers import Ids, d, pure_tool, registry, tool_turn, types

from harness_kernel.events import Event, create_event
from harness_kernel.models import AssistantMessage, FakeModel, ScriptedTurn, ToolMessage, UserMessage
from harness_kernel.runtime import (
    CheckpointError,
    CheckpointVersionError,
    ContextPolicy,
    ContinuationError,
    ContinueInput,
    EventAppendError,
    MinimalAgentRuntime,
    RunInput,
    RunStream,
)
from harness_kernel.runtime._checkpoint import decode_checkpoint, next_request, rebuild_context
from harness_kernel.runtime._context import SUMMARY_PREFIX, request_bytes
from harness_kernel.store import MemorySessionStore, SessionStoreError
from harness_workspace import AbortController

SESSION = "sess-1"


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


class Crashable:
    """An owner's event log that dies on demand: every write after ``die()`` fails."""

    def __init__(self, store: MemorySessionStore, owner: str) -> None:
        self.log = store.event_log(SESSION, owner_id=owner)
        self.dead = False

    def die(self) -> None:
        self.dead = True

    async def append(self, event: Event) -> None:
        if self.dead:
            raise OSError("the process is gone")
        await self.log.append(event)

    async def append_many(self, events: Sequence[Event]) -> None:
        if self.dead:
            raise OSError("the process is gone")
        await self.log.append_many(events)

    def read_session(self, session_id: str) -> Any:
        return self.log.read_session(session_id)


class Effects:
    """A tool whose every execution is counted (the side effect that must not repeat)."""

    def __init__(self) -> None:
        self.runs: list[object] = []
        self.block: trio.Event | None = None
        self.started = trio.Event()

    def tool(self) -> Any:
        async def execute(params: dict[str, object], context: object = None) -> object:
            self.runs.append(params)
            self.started.set()
            if self.block is not None:
                await self.block.wait()
            return {"done": params}

        return pure_tool("effect", execute)


async def _world(clock: Clock) -> MemorySessionStore:
    store = MemorySessionStore(now=clock)
    await store.create(SESSION, owner_id="first", lease_ms=1_000)
    return store


def _first_input(model: FakeModel, log: object, effects: Effects, **overrides: Any) -> RunInput:
    ids = Ids()
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "session_id": SESSION,
        "turn_id": "turn-1",
        "input": "do it",
        "model": "fake-model/v1",
        "model_adapter": model,
        "event_store": log,
        "tools": registry(effects.tool()),
        "checkpoints": True,
        "now": ids.now,
        "new_id": ids.new_id,
    }
    fields.update(overrides)
    return RunInput(**fields)


async def _until(stream: RunStream, stop: Callable[[Event], bool]) -> list[Event]:
    """Pull events until ``stop`` says so, then walk away (no close: the process died)."""
    seen: list[Event] = []
    iterator = stream.__aiter__()
    while True:
        event = await iterator.__anext__()
        seen.append(event)
        if stop(event):
            return seen


def _continue_input(
    store: MemorySessionStore, model: FakeModel, effects: Effects, **overrides: Any
) -> ContinueInput:
    fields: dict[str, Any] = {
        "session_id": SESSION,
        "sessions": store,
        "owner_id": "second",
        "lease_ms": 60_000,
        "event_store": store.event_log(SESSION, owner_id="second"),
        "model": "fake-model/v1",
        "model_adapter": model,
        "tools": registry(effects.tool()),
    }
    fields.update(overrides)
    return ContinueInput(**fields)


async def _drain(stream: RunStream) -> tuple[list[Event], BaseException | None]:
    events: list[Event] = []
    error: BaseException | None = None
    async with stream:
        try:
            async for event in stream:
                events.append(event)
        except Exception as raised:
            error = raised
    return events, error


async def _stored(store: MemorySessionStore) -> list[Event]:
    page = await store.read(SESSION, limit=1000)
    return [item.event for item in page.events]


def _is(kind: str, **fields: object) -> Callable[[Event], bool]:
    def check(event: Event) -> bool:
        return event.type == kind and all(getattr(event.data, k, None) == v for k, v in fields.items())

    return check


async def _crash(
    stop: Callable[[Event], bool], turns: list[ScriptedTurn]
) -> tuple[MemorySessionStore, Clock]:
    clock = Clock()
    store = await _world(clock)
    effects = Effects()
    log = Crashable(store, "first")
    stream = MinimalAgentRuntime().run(_first_input(FakeModel(turns), log, effects))
    await _until(stream, stop)
    await _bury(stream, log)
    clock.now += timedelta(seconds=5)  # the first owner's lease has run out
    return store, clock


async def _bury(stream: RunStream, log: Crashable) -> None:
    """The process is gone: nothing more is stored (closing the dead run writes nothing)."""
    log.die()
    with pytest.raises(EventAppendError):
        await stream.aclose()


# ------------------------------------------------------------------ continuation
async def test_a_turn_interrupted_before_its_tool_calls_ran_runs_them_once_and_completes() -> None:
    turns = [
        tool_turn(("m1", "effect", {"n": 1}), ("m2", "effect", {"n": 2})),
        ScriptedTurn(content="all done"),
    ]
    store, _ = await _crash(_is("runtime.checkpoint", boundary="response"), turns)
    effects = Effects()
    model = FakeModel([ScriptedTurn(content="all done")])
    events, error = await _drain(
        await MinimalAgentRuntime().continue_session(_continue_input(store, model, effects))
    )
    assert error is None
    assert effects.runs == [{"n": 1}, {"n": 2}]
    assert types(events)[0] == "turn.resumed"
    assert d(events[-2]).status == "completed"
    # The continued request holds the user's message, the calls and both results.
    sent = model.requests[0].messages
    assert [type(m).__name__ for m in sent] == [
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
        "ToolMessage",
    ]
    stored = await _stored(store)
    assert types(stored).count("turn.completed") == 1
    assert [e.event_id for e in stored[-len(events) :]] == [e.event_id for e in events]


async def test_a_tool_under_way_at_the_crash_is_never_run_again() -> None:
    clock = Clock()
    store = await _world(clock)
    effects = Effects()
    effects.block = trio.Event()
    log = Crashable(store, "first")
    model = FakeModel([tool_turn(("m1", "effect", {"n": 1})), ScriptedTurn(content="never")])
    stream = MinimalAgentRuntime().run(_first_input(model, log, effects))
    async with trio.open_nursery() as nursery:

        async def consume() -> None:
            async for _ in stream:
                pass

        nursery.start_soon(consume)
        await effects.started.wait()
        log.die()  # the process dies while the tool runs: its result is never stored
        nursery.cancel_scope.cancel()
    assert len(effects.runs) == 1
    clock.now += timedelta(seconds=5)
    after = Effects()
    model = FakeModel([ScriptedTurn(content="recovered")])
    events, error = await _drain(
        await MinimalAgentRuntime().continue_session(_continue_input(store, model, after))
    )
    assert error is None
    assert after.runs == []
    assert types(events)[:3] == ["turn.resumed", "tool.result", "message.completed"]
    assert d(events[0]).interrupted_calls == 1
    assert d(events[1]).ok is False
    assert d(events[1]).error.code == "TOOL_INTERRUPTED"
    last = model.requests[0].messages[-1]
    assert isinstance(last, ToolMessage)
    assert "TOOL_INTERRUPTED" in last.content
    assert d(events[-2]).status == "completed"


async def test_a_stored_result_whose_message_was_lost_is_not_run_again() -> None:
    turns = [tool_turn(("m1", "effect", {"n": 1})), ScriptedTurn(content="done")]
    store, _ = await _crash(_is("tool.result"), turns)
    effects = Effects()
    model = FakeModel([ScriptedTurn(content="done")])
    events, error = await _drain(
        await MinimalAgentRuntime().continue_session(_continue_input(store, model, effects))
    )
    assert error is None
    assert effects.runs == []
    assert types(events)[:2] == ["turn.resumed", "message.completed"]
    assert d(events[0]).interrupted_calls == 0
    assert model.requests[0].messages[-1] == ToolMessage(
        content='{"done":{"n":1}}', name="effect", tool_call_id="m1"
    )


async def test_an_unanswered_model_request_is_not_sent_again_by_default() -> None:
    store, _ = await _crash(_is("model.request"), [ScriptedTurn(content="lost")])
    model = FakeModel([ScriptedTurn(content="again")])
    events, error = await _drain(
        await MinimalAgentRuntime().continue_session(_continue_input(store, model, Effects()))
    )
    assert isinstance(error, ContinuationError)
    assert len(model.requests) == 0
    assert types(events) == ["turn.resumed", "turn.completed", "agent.stopped"]
    requested = next(e for e in await _stored(store) if e.type == "model.request")
    assert d(events[0]).abandoned_request_id == d(requested).request_id
    assert d(events[1]).status == "failed"


async def test_resend_uncertain_sends_the_checkpointed_request_again_under_a_new_id() -> None:
    store, _ = await _crash(_is("model.request"), [ScriptedTurn(content="lost")])
    stored = await _stored(store)
    checkpoints = [decode_checkpoint(e) for e in stored if e.type == "runtime.checkpoint"]
    expected = next_request(checkpoints, model="fake-model/v1")
    model = FakeModel([ScriptedTurn(content="again")])
    events, error = await _drain(
        await MinimalAgentRuntime().continue_session(
            _continue_input(store, model, Effects(), resend_uncertain=True, tools=None)
        )
    )
    assert error is None
    assert tuple(model.requests[0].messages) == tuple(expected.messages)
    new_request = next(e for e in events if e.type == "model.request")
    assert d(new_request).request_id != d(next(e for e in stored if e.type == "model.request")).request_id
    assert d(events[-2]).status == "completed"


async def test_a_recorded_final_answer_completes_without_calling_the_model() -> None:
    store, _ = await _crash(_is("message.completed", role="assistant"), [ScriptedTurn(content="the answer")])
    model = FakeModel([])
    events, error = await _drain(
        await MinimalAgentRuntime().continue_session(_continue_input(store, model, Effects()))
    )
    assert error is None
    assert len(model.requests) == 0
    assert types(events) == ["turn.resumed", "turn.completed", "agent.stopped"]
    assert d(events[1]).status == "completed"
    assert d(events[1]).output_message_id == next(
        d(e).message_id
        for e in await _stored(store)
        if e.type == "message.completed" and d(e).role == "assistant"
    )


async def test_cancellation_during_recovery_persists_the_canceled_pair_without_calling_the_model() -> None:
    turns = [tool_turn(("m1", "effect", {"n": 1})), ScriptedTurn(content="never")]
    store, _ = await _crash(_is("runtime.checkpoint", boundary="response"), turns)
    controller = AbortController()
    controller.abort("operator stopped it")
    effects = Effects()
    model = FakeModel([])
    events, _ = await _drain(
        await MinimalAgentRuntime().continue_session(
            _continue_input(store, model, effects, signal=controller.signal)
        )
    )
    assert len(model.requests) == 0
    assert effects.runs == []
    assert types(events)[-2:] == ["turn.completed", "agent.stopped"]
    assert d(events[-2]).status == "canceled"


async def test_the_lease_fences_a_competing_recovery_and_a_turn_is_continued_once() -> None:
    store, clock = await _crash(_is("model.request"), [ScriptedTurn(content="lost")])
    first = MinimalAgentRuntime()
    stream = await first.continue_session(
        _continue_input(
            store, FakeModel([ScriptedTurn(content="a")]), Effects(), resend_uncertain=True, tools=None
        )
    )
    with pytest.raises(SessionStoreError) as caught:
        await MinimalAgentRuntime().continue_session(
            _continue_input(
                store, FakeModel([]), Effects(), owner_id="third", event_store=store.event_log(SESSION)
            )
        )
    assert caught.value.code == "SESS_OWNERSHIP_LOST"
    _, error = await _drain(stream)
    assert error is None
    clock.now += timedelta(minutes=5)
    with pytest.raises(ContinuationError, match="nothing to continue"):
        await MinimalAgentRuntime().continue_session(
            _continue_input(
                store, FakeModel([]), Effects(), owner_id="third", event_store=store.event_log(SESSION)
            )
        )
    # The first owner, whose lease was taken over, can no longer write.
    late = create_event(
        "error", {"code": "LATE", "message": "late write"}, event_id="evt-late", at="2026-01-01T00:00:00.000Z"
    )
    with pytest.raises(SessionStoreError):
        await store.event_log(SESSION, owner_id="first").append(late)
    assert "evt-late" not in {e.event_id for e in await _stored(store)}


async def test_after_a_continuation_a_follow_up_sees_the_whole_conversation() -> None:
    turns = [tool_turn(("m1", "effect", {"n": 1})), ScriptedTurn(content="first answer")]
    store, _ = await _crash(_is("runtime.checkpoint", boundary="response"), turns)
    runtime = MinimalAgentRuntime()
    model = FakeModel([ScriptedTurn(content="first answer"), ScriptedTurn(content="second answer")])
    log = store.event_log(SESSION, owner_id="second")
    effects = Effects()
    _, error = await _drain(
        await runtime.continue_session(_continue_input(store, model, effects, event_store=log))
    )
    assert error is None
    follow = RunInput(
        run_id="run-2",
        session_id=SESSION,
        turn_id="turn-2",
        input="and now?",
        model="fake-model/v1",
        model_adapter=model,
        event_store=log,
        tools=registry(effects.tool()),
        checkpoints=True,
    )
    _, error = await _drain(runtime.follow_up(follow))
    assert error is None
    contents = [m.content for m in model.requests[-1].messages]
    assert contents[0] == "do it"
    assert contents[-2:] == ["first answer", "and now?"]
    # The stored checkpoint chain rebuilds exactly that request.
    stored = await _stored(store)
    checkpoints = [decode_checkpoint(e) for e in stored if e.type == "runtime.checkpoint"]
    assert tuple(rebuild_context(checkpoints)) == tuple(model.requests[-1].messages)


# ------------------------------------------------------------------ the checkpoint codec
def _checkpoint(state: object, version: int = 1, event_id: str = "evt-c") -> Event:
    return create_event(
        "runtime.checkpoint",
        {
            "runId": "r",
            "sessionId": "s",
            "turnId": "t",
            "version": version,
            "boundary": "request",
            "state": state,
            "requestId": "q",
        },
        event_id=event_id,
        at="2026-01-01T00:00:00.000Z",
    )


def _state(**changes: object) -> dict[str, object]:
    state: dict[str, object] = {
        "base": None,
        "messages": [{"role": "user", "content": "hi"}],
        "messageCount": 1,
        "messageRevision": 1,
        "usage": {"promptTokens": 1, "completionTokens": 2, "totalTokens": 3},
        "modelRequests": 0,
        "toolCalls": 0,
    }
    state.update(changes)
    return state


def test_a_checkpoint_of_an_unknown_version_is_a_typed_error() -> None:
    with pytest.raises(CheckpointVersionError) as caught:
        decode_checkpoint(_checkpoint(_state(), version=2))
    assert caught.value.version == 2
    assert caught.value.code == "RUNTIME_CHECKPOINT_VERSION"


@pytest.mark.parametrize(
    "changes",
    [
        {"messages": [{"role": "robot", "content": "x"}]},
        {"messages": [{"role": "user"}]},
        {"messageCount": 2},
        {"messageCount": -1},
        {"usage": {"promptTokens": 1, "completionTokens": 2, "totalTokens": 4}},
        {"extra": True},
        {
            "messages": [
                {
                    "role": "assistant",
                    "content": "",
                    "toolCalls": [{"id": "c", "name": "t", "arguments": "{"}],
                }
            ]
        },
        {"messages": [{"role": "tool", "content": "x", "name": "", "toolCallId": "c"}]},
    ],
)
def test_invalid_checkpoint_content_is_a_typed_error(changes: dict[str, object]) -> None:
    with pytest.raises(CheckpointError) as caught:
        decode_checkpoint(_checkpoint(_state(**changes)))
    assert caught.value.code == "RUNTIME_CHECKPOINT_INVALID"


def test_a_broken_chain_is_refused() -> None:
    first = decode_checkpoint(_checkpoint(_state(), event_id="evt-1"))
    second = decode_checkpoint(
        _checkpoint(
            _state(base="evt-other", messages=[{"role": "user", "content": "more"}], messageCount=2),
            event_id="evt-2",
        )
    )
    with pytest.raises(CheckpointError, match="does not continue"):
        rebuild_context([first, second])
    good = decode_checkpoint(
        _checkpoint(
            _state(base="evt-1", messages=[{"role": "user", "content": "more"}], messageCount=2),
            event_id="evt-3",
        )
    )
    assert rebuild_context([first, good]) == (UserMessage(content="hi"), UserMessage(content="more"))
    with pytest.raises(CheckpointError):
        rebuild_context([])


def test_next_request_rebuilds_every_request_of_a_checkpointed_run() -> None:
    async def scenario() -> None:
        effects = Effects()
        store = MemorySessionStore()
        await store.create(SESSION, owner_id="first", lease_ms=60_000)
        log = store.event_log(SESSION, owner_id="first")
        model = FakeModel(
            [
                tool_turn(("m1", "effect", {"n": 1})),
                tool_turn(("m2", "effect", {"n": 2})),
                ScriptedTurn(content="x"),
            ]
        )
        run_input = _first_input(model, log, effects, system="be kind", max_tokens=64)
        events, error = await _drain(MinimalAgentRuntime().run(run_input))
        assert error is None
        checkpoints = [decode_checkpoint(e) for e in events if e.type == "runtime.checkpoint"]
        requests = [i for i, cp in enumerate(checkpoints) if cp.boundary == "request"]
        assert len(requests) == len(model.requests) == 3
        for index, sent in zip(requests, model.requests, strict=True):
            rebuilt = next_request(
                checkpoints[: index + 1],
                model="fake-model/v1",
                tools=None if sent.tools is None else tuple(sent.tools),
                system="be kind",
                max_tokens=64,
            )
            assert tuple(rebuilt.messages) == tuple(sent.messages)
            assert rebuilt.max_tokens == sent.max_tokens
        # Each checkpoint holds only what changed since the one before it.
        assert sum(len(cp.messages) for cp in checkpoints) == len(model.requests[-1].messages)

    trio.run(scenario)


async def test_a_compaction_stored_before_the_crash_is_kept_and_not_asked_again() -> None:
    context = [UserMessage(content=f"old message {i} " + "x" * 300) for i in range(20)]
    size = request_bytes([*context, UserMessage(content="do it")], system=None, tools=None)
    policy = ContextPolicy(window_tokens=size * 2, threshold_tokens=size - 10, tail_messages=3)
    clock = Clock()
    store = await _world(clock)
    log = Crashable(store, "first")
    effects = Effects()
    model = FakeModel([ScriptedTurn(content="the summary"), ScriptedTurn(content="lost")])
    stream = MinimalAgentRuntime().run(
        _first_input(model, log, effects, context=context, context_policy=policy, tools=None)
    )
    await _until(stream, _is("context.compacted"))
    await _bury(stream, log)
    clock.now += timedelta(seconds=5)
    model = FakeModel([ScriptedTurn(content="answer")])
    events, error = await _drain(
        await MinimalAgentRuntime().continue_session(
            _continue_input(store, model, effects, context_policy=policy, tools=None)
        )
    )
    assert error is None
    assert len(model.requests) == 1  # no second summary request
    sent = model.requests[0].messages
    assert sent[0] == UserMessage(content=SUMMARY_PREFIX + "the summary")
    assert tuple(sent[1:]) == (*context[-2:], UserMessage(content="do it"))
    assert "context.compacted" not in types(events)
    stored = await _stored(store)
    checkpoints = [decode_checkpoint(e) for e in stored if e.type == "runtime.checkpoint"]
    assert tuple(rebuild_context(checkpoints)) == tuple(sent)


async def test_a_conversation_whose_turn_ended_is_taken_up_after_a_restart_for_a_follow_up() -> None:
    clock = Clock()
    store = await _world(clock)
    effects = Effects()
    first_log = store.event_log(SESSION, owner_id="first")
    model = FakeModel([tool_turn(("m1", "effect", {"n": 1})), ScriptedTurn(content="first answer")])
    _, error = await _drain(MinimalAgentRuntime().run(_first_input(model, first_log, effects)))
    assert error is None
    history = (*model.requests[-1].messages, AssistantMessage(content="first answer"))
    clock.now += timedelta(seconds=5)  # the server is gone; its lease ran out
    runtime = MinimalAgentRuntime()
    log = store.event_log(SESSION, owner_id="second")
    with pytest.raises(ContinuationError, match="nothing to continue"):
        await runtime.continue_session(_continue_input(store, FakeModel([]), effects, event_store=log))
    before = len(await _stored(store))
    plan = await runtime.resume_conversation(_continue_input(store, FakeModel([]), effects, event_store=log))
    assert (plan.status, plan.final_text) == ("completed", "first answer")
    assert plan.messages == history
    assert len(await _stored(store)) == before  # taking it up stored nothing
    follow = FakeModel([ScriptedTurn(content="second answer")])
    second = RunInput(
        run_id="run-2",
        session_id=SESSION,
        turn_id="turn-2",
        input="and now?",
        model="fake-model/v1",
        model_adapter=follow,
        event_store=log,
        checkpoints=True,
    )
    events, error = await _drain(runtime.follow_up(second))
    assert error is None
    assert tuple(follow.requests[0].messages) == (*history, UserMessage(content="and now?"))
    assert d(events[-2]).usage.total_tokens > plan.usage.total_tokens
    # The old owner can no longer write; an interrupted session is refused here.
    with pytest.raises(SessionStoreError):
        await first_log.append(create_event("error", {"code": "LATE", "message": "x"}, event_id="evt-x"))
    store2, _ = await _crash(_is("model.request"), [ScriptedTurn(content="lost")])
    with pytest.raises(ContinuationError, match="continue it instead"):
        await MinimalAgentRuntime().resume_conversation(
            _continue_input(
                store2, FakeModel([]), effects, owner_id="x", event_store=store2.event_log(SESSION)
            )
        )
