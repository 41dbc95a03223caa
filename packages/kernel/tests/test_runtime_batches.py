"""The runtime stores the events the spec publishes without an acknowledgement wait (§8.4) in one call.

A :class:`BatchEventStore` gets the three admission events in one ``append_many`` and the
terminal pair in another; everything else one ``append`` at a time. A plain ``EventStore``
gets every event through ``append`` (``test_runtime_contract`` pins that path).
"""

from __future__ import annotations

from collections.abc import Sequence

from runtime_helpers import drain, make_input, registry, tool_turn, types

from harness_kernel.events import Event
from harness_kernel.models import FakeModel, ScriptedTurn
from harness_kernel.runtime import EventAppendError, MinimalAgentRuntime
from harness_kernel.store import BatchEventStore, MemorySessionStore, SequencedEvent, SessionEventLog
from harness_tools import create_echo_tool


class CallLog(SessionEventLog):
    """A session log that records each store call's event types; optionally fails one batch."""

    def __init__(self, store: MemorySessionStore, fail_batch_with: str | None = None) -> None:
        super().__init__(store, "sess-1")
        self.calls: list[list[str]] = []
        self.fail_batch_with = fail_batch_with

    async def append(self, event: Event) -> SequencedEvent:
        self.calls.append([event.type])
        return await super().append(event)

    async def append_many(self, events: Sequence[Event]) -> tuple[SequencedEvent, ...]:
        self.calls.append(types(list(events)))
        if self.fail_batch_with is not None and events[0].type == self.fail_batch_with:
            raise OSError("disk full")
        return await super().append_many(events)


async def _log(fail_batch_with: str | None = None) -> tuple[MemorySessionStore, CallLog]:
    store = MemorySessionStore()
    await store.create("sess-1")
    return store, CallLog(store, fail_batch_with)


async def test_admission_and_the_terminal_pair_are_one_store_call_each() -> None:
    store, log = await _log()
    assert isinstance(log, BatchEventStore)
    model = FakeModel([ScriptedTurn(text_deltas=["a", "b"])])
    events, error = await drain(MinimalAgentRuntime().run(make_input(model, log)))
    assert error is None
    assert log.calls == [
        ["agent.started", "turn.started", "message.completed"],
        ["model.request"],
        ["message.delta"],
        ["message.delta"],
        ["model.response"],
        ["message.completed"],
        ["turn.completed", "agent.stopped"],
    ]
    stored = await store.slice("sess-1", 0)
    assert [item.event for item in stored] == events
    assert [item.seq for item in stored] == list(range(len(events)))


async def test_a_tool_round_keeps_one_call_per_acknowledged_event() -> None:
    _, log = await _log()
    model = FakeModel([tool_turn(("c1", "echo", {"text": "x"})), ScriptedTurn(content="ok")])
    run_input = make_input(model, log, tools=registry(create_echo_tool()))
    events, error = await drain(MinimalAgentRuntime().run(run_input))
    assert error is None
    batches = [call for call in log.calls if len(call) > 1]
    assert batches == [
        ["agent.started", "turn.started", "message.completed"],
        ["turn.completed", "agent.stopped"],
    ]
    assert sum(len(call) for call in log.calls) == len(events)


async def test_a_failed_batch_poisons_the_run_with_its_first_type_and_delivers_none_of_it() -> None:
    store, log = await _log(fail_batch_with="agent.started")
    model = FakeModel([ScriptedTurn(content="never")])
    events, error = await drain(MinimalAgentRuntime().run(make_input(model, log)))
    assert isinstance(error, EventAppendError)
    assert error.event_type == "agent.started"
    assert isinstance(error.__cause__, OSError)
    assert events == []
    assert await store.size("sess-1") == 0
    assert model.requests == ()


async def test_a_failed_terminal_batch_stores_neither_event_of_the_pair() -> None:
    store, log = await _log(fail_batch_with="turn.completed")
    model = FakeModel([ScriptedTurn(content="done")])
    events, error = await drain(MinimalAgentRuntime().run(make_input(model, log)))
    assert isinstance(error, EventAppendError)
    assert error.event_type == "turn.completed"
    assert "turn.completed" not in types(events)
    assert [item.event for item in await store.slice("sess-1", 0)] == events
