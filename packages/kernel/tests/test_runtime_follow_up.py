"""Follow-up turns (issue #23 §1): a new turn on the same session after the previous one
ended inherits its messages, pending steering and usage; it may not replace the context,
run beside an active turn, or use another store."""

from __future__ import annotations

import pytest
import trio
from runtime_helpers import Ids, d, drain, make_input, pure_tool, registry, tool_turn, types

from harness_kernel.events import Event
from harness_kernel.models import AssistantMessage, FakeModel, ScriptedTurn, ToolMessage, Usage, UserMessage
from harness_kernel.runtime import (
    FollowUpError,
    MinimalAgentRuntime,
    RunAlreadyExistsError,
    RunInput,
    RuntimeBudget,
    RuntimeBudgetExceededError,
    TurnActiveError,
)
from harness_kernel.store import MemoryEventStore


def _second(model: object, store: MemoryEventStore, ids: Ids, **overrides: object) -> RunInput:
    fields: dict[str, object] = {"run_id": "run-2", "turn_id": "turn-2", "input": "and then?", "ids": ids}
    fields.update(overrides)
    return make_input(model, store, **fields)


async def test_a_follow_up_sends_every_earlier_message_unchanged_and_continues_the_revisions() -> None:
    async def execute(params: dict[str, object], context: object = None) -> object:
        return {"seen": params}

    model = FakeModel(
        [tool_turn(("m1", "probe", {"a": 1})), ScriptedTurn(content="first"), ScriptedTurn(content="second")]
    )
    store = MemoryEventStore()
    ids = Ids()
    runtime = MinimalAgentRuntime()
    tools = registry(pure_tool("probe", execute))
    first, error = await drain(runtime.run(make_input(model, store, ids=ids, tools=tools)))
    assert error is None
    history = (*model.requests[-1].messages, AssistantMessage(content="first"))
    second, error = await drain(runtime.follow_up(_second(model, store, ids, tools=tools)))
    assert error is None
    sent = tuple(model.requests[-1].messages)
    assert sent[: len(history)] == history
    assert sent[len(history) :] == (UserMessage(content="and then?"),)
    assert [type(m) for m in sent] == [
        UserMessage,
        AssistantMessage,
        ToolMessage,
        AssistantMessage,
        UserMessage,
    ]
    user = next(e for e in second if e.type == "message.completed")
    assert d(user).message_revision == len(history) + 1
    assert d(second[-2]).status == "completed"
    # Both turns are in the one store, in order, nothing rewritten.
    assert [e.event_id for e in store.events] == [e.event_id for e in first + second]


async def test_a_follow_up_inherits_the_usage_and_the_token_budget_counts_the_session() -> None:
    usage = Usage(prompt_tokens=60, completion_tokens=10, total_tokens=70)
    model = FakeModel([ScriptedTurn(content="a", usage=usage), ScriptedTurn(content="b", usage=usage)])
    store = MemoryEventStore()
    ids = Ids()
    runtime = MinimalAgentRuntime()
    budget = RuntimeBudget(max_model_tokens=100)
    first, _ = await drain(runtime.run(make_input(model, store, ids=ids, budget=budget)))
    assert d(first[-2]).usage.total_tokens == 70
    second, error = await drain(runtime.follow_up(_second(model, store, ids, budget=budget)))
    assert isinstance(error, RuntimeBudgetExceededError)
    assert error.used == 140
    assert d(second[-2]).usage.total_tokens == 140
    # The remaining budget capped the follow-up's request.
    assert model.requests[1].max_tokens == 30


async def test_steering_left_pending_by_a_canceled_turn_is_applied_in_the_follow_up() -> None:
    model = FakeModel([ScriptedTurn(content="a"), ScriptedTurn(content="b")])
    store = MemoryEventStore()
    ids = Ids()
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(model, store, ids=ids))
    async with stream:
        async for event in stream:
            if event.type == "message.completed":
                await stream.steer("remember the tests")
                await runtime.cancel("run-1")
    assert d(store.events[-2]).status == "canceled"
    second, error = await drain(runtime.follow_up(_second(model, store, ids)))
    assert error is None
    applied = [e for e in second if e.type == "steering.applied"]
    queued = next(e for e in store.events if e.type == "steering.queued")
    assert [d(e).message_id for e in applied] == [d(queued).message_id]
    assert [m.content for m in model.requests[0].messages] == ["hello", "and then?", "remember the tests"]
    assert types(second)[:5] == [
        "agent.started",
        "turn.started",
        "message.completed",
        "steering.applied",
        "model.request",
    ]


async def test_a_follow_up_may_not_run_beside_an_active_turn_nor_replace_the_context_nor_change_store() -> (
    None
):
    model = FakeModel([ScriptedTurn(content="a"), ScriptedTurn(content="b")])
    store = MemoryEventStore()
    ids = Ids()
    runtime = MinimalAgentRuntime()
    with pytest.raises(FollowUpError, match="no earlier turn"):
        runtime.follow_up(make_input(model, store, ids=ids))
    stream = runtime.run(make_input(model, store, ids=ids))
    with pytest.raises(TurnActiveError):
        runtime.follow_up(_second(model, store, ids))
    with pytest.raises(TurnActiveError):
        runtime.run(_second(model, store, ids))
    await drain(stream)
    before = list(store.events)
    with pytest.raises(FollowUpError, match="context"):
        runtime.follow_up(_second(model, store, ids, context=[UserMessage(content="forged")]))
    with pytest.raises(FollowUpError, match="store"):
        runtime.follow_up(_second(model, MemoryEventStore(), ids))
    with pytest.raises(RunAlreadyExistsError):
        runtime.follow_up(_second(model, store, ids, run_id="run-1"))
    assert list(store.events) == before
    # The refusals changed nothing: a proper follow-up still sees the first turn.
    _, error = await drain(runtime.follow_up(_second(model, store, ids)))
    assert error is None
    assert [m.content for m in model.requests[-1].messages] == ["hello", "a", "and then?"]


async def test_a_turn_whose_events_were_not_stored_stops_the_session_on_this_runtime() -> None:
    class Failing(MemoryEventStore):
        fail = False

        async def append(self, event: Event) -> None:
            if self.fail and event.type == "model.response":
                raise OSError("disk gone")
            await super().append(event)

    store = Failing()
    ids = Ids()
    model = FakeModel([ScriptedTurn(content="a"), ScriptedTurn(content="b")])
    runtime = MinimalAgentRuntime()
    store.fail = True
    _, error = await drain(runtime.run(make_input(model, store, ids=ids)))
    assert error is not None
    store.fail = False
    with pytest.raises(FollowUpError, match="could not store"):
        runtime.follow_up(_second(model, store, ids))


async def test_follow_ups_of_two_sessions_on_one_runtime_stay_apart() -> None:
    model = FakeModel([ScriptedTurn(content=f"r{i}") for i in range(4)])
    stores = {"sess-a": MemoryEventStore(), "sess-b": MemoryEventStore()}
    ids = Ids()
    runtime = MinimalAgentRuntime()
    async with trio.open_nursery() as nursery:
        for name, store in stores.items():
            nursery.start_soon(
                drain, runtime.run(make_input(model, store, ids=ids, session_id=name, run_id=f"{name}-1"))
            )
    for name, store in stores.items():
        follow = make_input(
            model, store, ids=ids, session_id=name, run_id=f"{name}-2", turn_id="t2", input=f"more {name}"
        )
        _, error = await drain(runtime.follow_up(follow))
        assert error is None
        contents = [m.content for m in model.requests[-1].messages]
        assert contents[-1] == f"more {name}"
        assert len(contents) == 3
        assert all(e.data.session_id == name for e in store.events)  # type: ignore[union-attr]


async def test_calls_a_canceled_turn_never_ran_are_answered_as_not_run_before_the_follow_up() -> None:
    started = trio.Event()

    async def execute(params: dict[str, object], context: object = None) -> object:
        started.set()
        await trio.sleep_forever()

    tools = registry(pure_tool("probe", execute))
    model = FakeModel([tool_turn(("m1", "probe", {}), ("m2", "probe", {})), ScriptedTurn(content="fine")])
    store = MemoryEventStore()
    ids = Ids()
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(model, store, ids=ids, tools=tools))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain, stream)
        await started.wait()
        await runtime.cancel("run-1")
    assert d(store.events[-2]).status == "canceled"
    second, error = await drain(runtime.follow_up(_second(model, store, ids, tools=tools)))
    assert error is None
    sent = model.requests[-1].messages
    # m1 has its canceled result; m2 never ran and is answered as not run, before the question.
    assert [type(m).__name__ for m in sent] == [
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
        "ToolMessage",
        "UserMessage",
    ]
    closing = sent[3]
    assert isinstance(closing, ToolMessage)
    assert closing.tool_call_id == "m2"
    assert "TOOL_NOT_RUN" in closing.content
    assert types(second)[:4] == ["agent.started", "turn.started", "message.completed", "message.completed"]
    assert d(second[2]).role == "tool"
    assert d(second[3]).role == "user"
    assert d(second[3]).message_revision == d(second[2]).message_revision + 1
