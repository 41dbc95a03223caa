"""Steering at every model-request boundary (issue #23 §1): never spliced into a request in
flight, applied as user messages with ``steering.applied`` before ``model.request``, another
round when the model stops with steering pending, FIFO, typed refusals, one terminal outcome."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from runtime_helpers import d, make_input, pure_tool, registry, tool_turn, types

from harness_kernel.events import Event
from harness_kernel.models import FakeModel, ScriptedTurn, UserMessage
from harness_kernel.runtime import (
    EventAppendError,
    InvalidRunInputError,
    MinimalAgentRuntime,
    RunStream,
    RunTerminalError,
    RuntimeBudget,
)
from harness_kernel.store import MemoryEventStore


def _users(request: Any) -> list[str]:
    return [m.content for m in request.messages if isinstance(m, UserMessage)]


async def _consume(stream: RunStream, on_event: Any) -> list[Event]:
    """Iterate ``stream``; ``on_event(event)`` runs inside the consumer step after each event."""
    events: list[Event] = []
    async with stream:
        async for event in stream:
            events.append(event)
            await on_event(event)
    return events


async def test_a_steer_during_the_model_phase_waits_for_the_next_boundary_and_forces_another_round() -> None:
    model = FakeModel([ScriptedTurn(text_deltas=["first ", "answer"]), ScriptedTurn(content="revised")])
    store = MemoryEventStore()
    stream = MinimalAgentRuntime().run(make_input(model, store))
    steered: list[str] = []

    async def on_event(event: Event) -> None:
        if event.type == "message.delta" and not steered:
            # The first request is in flight (its stream is being pulled).
            steered.append(await stream.steer("use the other file"))

    events = await _consume(stream, on_event)
    assert len(model.requests) == 2
    assert _users(model.requests[0]) == ["hello"]
    assert _users(model.requests[1]) == ["hello", "use the other file"]
    order = types(events)
    queued = order.index("steering.queued")
    assert order.index("message.delta") < queued < order.index("model.response")
    applied = order.index("steering.applied")
    assert order[applied + 1] == "model.request"
    assert d(events[applied]).message_id == steered[0] == d(events[queued]).message_id
    assert d(events[applied]).request_id == d(events[applied + 1]).request_id
    # The second request holds: user, assistant ("first answer"), steering.
    assert d(events[applied + 1]).message_count == 3
    assert d(events[applied]).message_revision == d(events[applied + 1]).message_revision == 3
    assert order[-2:] == ["turn.completed", "agent.stopped"]
    assert d(events[-2]).status == "completed"
    assert d(events[-2]).model_requests == 2
    assert [e.event_id for e in store.events] == [e.event_id for e in events]


async def test_a_steer_during_the_tool_phase_is_applied_after_the_tool_results() -> None:
    async def execute(params: dict[str, object], context: object = None) -> object:
        return {"ok": True}

    tool = pure_tool("probe", execute)
    model = FakeModel([tool_turn(("m1", "probe", {}), ("m2", "probe", {})), ScriptedTurn(content="done")])
    stream = MinimalAgentRuntime().run(make_input(model, tools=registry(tool)))

    async def on_event(event: Event) -> None:
        if event.type == "tool.call" and d(event).model_call_id == "m1":
            await stream.steer("mind the tests")

    events = await _consume(stream, on_event)
    assert len(model.requests) == 2
    second = model.requests[1].messages
    assert [type(m).__name__ for m in second] == [
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
        "ToolMessage",
        "UserMessage",
    ]
    assert isinstance(second[-1], UserMessage)
    assert second[-1].content == "mind the tests"
    order = types(events)
    # Both tool results are recorded before the steering is applied.
    last_result = max(i for i, t in enumerate(order) if t == "tool.result")
    assert last_result < order.index("steering.applied") < order.index("model.request", last_result)


async def test_concurrent_steers_are_applied_in_the_order_they_were_stored() -> None:
    model = FakeModel([ScriptedTurn(content="a"), ScriptedTurn(content="b")])
    stream = MinimalAgentRuntime().run(make_input(model))
    texts = [f"note {i}" for i in range(12)]

    async def on_event(event: Event) -> None:
        if event.type == "model.request" and len(model.requests) == 0:
            async with trio.open_nursery() as nursery:
                for text in texts:
                    nursery.start_soon(stream.steer, text)

    events = await _consume(stream, on_event)
    queued = [d(e).content for e in events if e.type == "steering.queued"]
    assert sorted(queued) == sorted(texts)
    assert _users(model.requests[1])[1:] == queued
    applied = [d(e).message_id for e in events if e.type == "steering.applied"]
    assert applied == [d(e).message_id for e in events if e.type == "steering.queued"]


async def test_at_most_1024_steers_may_be_pending() -> None:
    model = FakeModel([ScriptedTurn(content="a")])
    stream = MinimalAgentRuntime().run(make_input(model))
    for i in range(1024):
        await stream.steer(f"s{i}")
    with pytest.raises(InvalidRunInputError, match="1024"):
        await stream.steer("one too many")
    for bad in ["", "x" * (256 * 1024 + 1), "\ud800"]:
        with pytest.raises(InvalidRunInputError):
            await stream.steer(bad)
    events = await _consume(stream, _ignore)
    assert types(events).count("steering.applied") == 1024
    assert len(model.requests[0].messages) == 1025


async def _ignore(event: Event) -> None:
    return None


async def test_a_steer_while_the_final_answer_is_delivered_still_wins_another_round() -> None:
    model = FakeModel([ScriptedTurn(content="a"), ScriptedTurn(content="b")])
    stream = MinimalAgentRuntime().run(make_input(model))

    async def on_event(event: Event) -> None:
        if event.type == "message.completed" and d(event).role == "assistant" and d(event).content == "a":
            # Not yet acknowledged: completion has not won, so the steer is taken.
            await stream.steer("one more thing")

    events = await _consume(stream, on_event)
    assert len(model.requests) == 2
    assert _users(model.requests[1]) == ["hello", "one more thing"]
    assert d(events[-2]).status == "completed"


async def test_steering_after_the_end_is_refused() -> None:
    model = FakeModel([ScriptedTurn(content="a")])
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(model))
    refusals: list[str] = []

    async def on_event(event: Event) -> None:
        if event.type == "turn.completed":
            with pytest.raises(RunTerminalError) as caught:
                await stream.steer("too late")
            refusals.append(caught.value.status)

    events = await _consume(stream, on_event)
    assert refusals == ["completed"]
    assert "steering.queued" not in types(events)
    with pytest.raises(RunTerminalError) as caught:
        await stream.steer("after the end")
    assert caught.value.status == "completed"
    with pytest.raises(RunTerminalError):
        await runtime.steer("run-1", "after the end")


async def test_a_steer_racing_cancellation_stays_in_history_and_the_run_ends_canceled_once() -> None:
    gate = trio.Event()

    class SlowStore(MemoryEventStore):
        async def append(self, event: Event) -> None:
            if event.type == "steering.queued":
                await gate.wait()
            await super().append(event)

    store = SlowStore()
    model = FakeModel([ScriptedTurn(content="a")])
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(model, store))
    outcome: list[object] = []

    async def steer() -> None:
        try:
            await stream.steer("racing")
            outcome.append("stored")
        except RunTerminalError as error:
            outcome.append(error)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(steer)
        await trio.testing.wait_all_tasks_blocked()
        cancel_done = trio.Event()

        async def cancel() -> None:
            await runtime.cancel("run-1")
            cancel_done.set()

        nursery.start_soon(cancel)
        await trio.testing.wait_all_tasks_blocked()
        gate.set()
    assert outcome == ["stored"]
    with pytest.raises(RunTerminalError):
        await stream.steer("after cancel")
    stored = types(store.events)
    assert "steering.queued" in stored
    assert "steering.applied" not in stored
    assert len(model.requests) == 0
    assert stored.count("turn.completed") == 1
    assert stored[-2:] == ["turn.completed", "agent.stopped"]
    assert d(store.events[-2]).status == "canceled"


async def test_a_steer_after_cancellation_was_requested_is_refused_and_stores_nothing() -> None:
    model = FakeModel([ScriptedTurn(content="a")])
    runtime = MinimalAgentRuntime()
    store = MemoryEventStore()
    stream = runtime.run(make_input(model, store))
    await runtime.cancel("run-1")
    with pytest.raises(RunTerminalError):
        await stream.steer("no")
    assert "steering.queued" not in types(store.events)
    assert types(store.events)[-2:] == ["turn.completed", "agent.stopped"]


@settings(max_examples=60, deadline=None)
@given(
    steer_at=st.lists(st.integers(0, 30), max_size=6),
    cancel_at=st.one_of(st.none(), st.integers(0, 30)),
    rounds=st.integers(1, 3),
)
def test_any_interleaving_of_steers_and_cancel_ends_once_and_loses_no_steer(
    steer_at: list[int], cancel_at: int | None, rounds: int
) -> None:
    async def execute(params: dict[str, object], context: object = None) -> object:
        return {"ok": True}

    async def scenario() -> None:
        turns = [tool_turn((f"m{i}", "probe", {})) for i in range(rounds)] + [
            ScriptedTurn(content=f"answer {i}") for i in range(8)
        ]
        model = FakeModel(turns)
        store = MemoryEventStore()
        runtime = MinimalAgentRuntime()
        stream = runtime.run(
            make_input(
                model, store, tools=registry(pure_tool("probe", execute)), budget=RuntimeBudget(max_steps=12)
            )
        )
        taken: list[str] = []
        delivered: list[Event] = []
        async with stream:
            async for event in stream:
                delivered.append(event)
                index = len(delivered)
                for _ in range(steer_at.count(index)):
                    with contextlib.suppress(RunTerminalError):
                        taken.append(await stream.steer(f"steer at {index}"))
                if cancel_at == index:
                    with contextlib.suppress(RunTerminalError):
                        await runtime.cancel("run-1")
        stored = list(store.events)
        assert [e.event_id for e in stored] == [e.event_id for e in delivered]
        kinds = types(stored)
        assert kinds.count("turn.completed") == 1
        assert kinds[-1] == "agent.stopped"
        queued = [d(e).message_id for e in stored if e.type == "steering.queued"]
        applied = [d(e).message_id for e in stored if e.type == "steering.applied"]
        assert queued == taken
        assert len(set(applied)) == len(applied)
        assert applied == queued[: len(applied)]
        for i, kind in enumerate(kinds):
            if kind == "steering.applied":
                assert kinds[i + 1] in ("steering.applied", "model.request")
        if d(stored[-2]).status == "completed":
            assert applied == queued

    trio.run(scenario)


async def test_a_steer_whose_append_fails_stops_the_run_before_the_model_is_called() -> None:
    class FailingSteer(MemoryEventStore):
        async def append(self, event: Event) -> None:
            if event.type == "steering.queued":
                raise OSError("disk full")
            await super().append(event)

    store = FailingSteer()
    model = FakeModel([ScriptedTurn(content="never")])
    stream = MinimalAgentRuntime().run(make_input(model, store))
    failures: list[BaseException] = []

    async def on_event(event: Event) -> None:
        if event.type == "model.request":
            try:
                await stream.steer("too much")
            except EventAppendError as error:
                failures.append(error)

    with pytest.raises(EventAppendError):
        await _consume(stream, on_event)
    assert len(failures) == 1
    assert len(model.requests) == 0
    assert "turn.completed" not in types(store.events)
