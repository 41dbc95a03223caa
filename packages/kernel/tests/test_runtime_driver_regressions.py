"""Regressions found by the driver state machine (``test_runtime_driver_machine.py``, issue #16).

Spec §8.4 (``aclose``; trio cancellation of the consumer's task is abandonment), §8.6 steps 7
and 9 (an interrupted ask or tool still records its outcome), §8.10 (``cancel`` returns only when
the run ended canceled; otherwise it raises the failure, or the outcome, it waited for).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Literal

import pytest
import trio
import trio.testing
from runtime_helpers import AskController, d, make_input, pure_tool, registry, tool_turn, types

from harness_kernel.events import Event
from harness_kernel.models import FakeModel, ModelRequest, ScriptedTurn
from harness_kernel.policy import PermissionRequest
from harness_kernel.runtime import (
    EventAppendError,
    MinimalAgentRuntime,
    RunStream,
    RunTerminalError,
    RuntimeBudget,
    RuntimeBudgetExceededError,
)
from harness_kernel.store import MemoryEventStore
from harness_workspace import AbortSignal

PAIR = ["turn.completed", "agent.stopped"]


class GatedStore(MemoryEventStore):
    """Holds the first append of ``gate_type`` until ``release``; then fails it if ``fail``."""

    def __init__(self, gate_type: str, *, fail: bool) -> None:
        super().__init__()
        self.gate_type = gate_type
        self.fail = fail
        self.entered = trio.Event()
        self.release = trio.Event()
        self.attempts: list[str] = []

    async def append(self, event: Event) -> None:
        self.attempts.append(event.type)
        if event.type == self.gate_type:
            self.entered.set()
            await self.release.wait()
            if self.fail:
                raise OSError(f"disk full at {event.type}")
        await super().append(event)


class Stalling:
    """A model whose first pull never returns (run cancellation ends it)."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[object]:
        await trio.sleep_forever()
        yield  # pragma: no cover


async def step_until(stream: RunStream, event_type: str) -> list[Event]:
    iterator = stream.__aiter__()
    seen: list[Event] = []
    while not seen or seen[-1].type != event_type:
        seen.append(await iterator.__anext__())
    return seen


class Outcomes:
    """What each concurrent call returned or raised, by name."""

    def __init__(self) -> None:
        self.by_name: dict[str, object] = {}

    def start(self, nursery: trio.Nursery, name: str, call: Callable[[], Awaitable[None]]) -> None:
        async def run() -> None:
            try:
                await call()
                self.by_name[name] = "returned"
            except EventAppendError as error:
                self.by_name[name] = error

        nursery.start_soon(run)


# ------------------------------------------------ §8.4: a second aclose() while the first drives


@pytest.mark.parametrize("fail", [False, True], ids=["pair-appended", "pair-append-fails"])
async def test_a_second_aclose_waits_for_the_pair_the_first_one_is_appending(fail: bool) -> None:
    store = GatedStore("turn.completed", fail=fail)
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(Stalling(), store))
    await step_until(stream, "model.request")
    outcomes = Outcomes()
    async with trio.open_nursery() as nursery:
        outcomes.start(nursery, "first", stream.aclose)
        await store.entered.wait()  # the first aclose() drives the canceled pair, held at the gate
        outcomes.start(nursery, "second", stream.aclose)
        await trio.testing.wait_all_tasks_blocked()
        before_release = dict(outcomes.by_name)
        store.release.set()
    # On main the second call returned before the release, with the run still live and no
    # pair durable (and, when that append then failed, it never raised EventAppendError).
    assert before_release == {}
    for name in ("first", "second"):
        if fail:
            assert isinstance(outcomes.by_name[name], EventAppendError)
        else:
            assert outcomes.by_name[name] == "returned"
    assert types(store.events)[-2:] == (["message.completed", "model.request"] if fail else PAIR)
    with pytest.raises(RunTerminalError) as raised:
        await runtime.steer("run-1", "late")
    assert raised.value.status == ("failed" if fail else "canceled")


# ------------------------------------------------ §8.10: cancel() while the run finishes as canceled


async def test_a_cancel_arriving_while_the_canceled_pair_is_appended_raises_its_append_failure() -> None:
    store = GatedStore("turn.completed", fail=True)
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(Stalling(), store))
    await step_until(stream, "model.request")
    outcomes = Outcomes()
    async with trio.open_nursery() as nursery:
        outcomes.start(nursery, "first", lambda: runtime.cancel("run-1"))
        await store.entered.wait()  # status completing, finishing as canceled
        outcomes.start(nursery, "second", lambda: runtime.cancel("run-1"))
        await trio.testing.wait_all_tasks_blocked()
        store.release.set()
    # On main the second call returned normally although no canceled pair was ever appended.
    for name in ("first", "second"):
        error = outcomes.by_name[name]
        assert isinstance(error, EventAppendError)
        assert error.event_type == "turn.completed"
    assert "turn.completed" not in types(store.events)
    with pytest.raises(RunTerminalError) as raised:
        await runtime.cancel("run-1")
    assert raised.value.status == "failed"


# ------------------------------------------------ §8.4 with §8.6: the consumer's task cancelled mid-step


class Held:
    """A resolver or tool that waits until cancelled, recording that it started and how it ended."""

    def __init__(self) -> None:
        self.entered = trio.Event()
        self.ended: list[str] = []

    async def wait(self) -> object:
        self.entered.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.ended.append("cancelled")
            raise
        raise AssertionError("unreachable")  # pragma: no cover


async def _cancel_the_consumer_inside_its_step(stream: RunStream, held: Held) -> list[Event]:
    """Step until the held part starts, then cancel the consumer's task; return what it saw."""
    seen: list[Event] = []
    iterator = stream.__aiter__()
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:

            async def consume() -> None:
                while True:
                    seen.append(await iterator.__anext__())

            nursery.start_soon(consume)
            await held.entered.wait()
            scope.cancel()
    assert scope.cancelled_caught
    # Abandoned: the consumer's next step only stops.
    with pytest.raises(StopAsyncIteration):
        await iterator.__anext__()
    return seen


@pytest.mark.parametrize("held_part", ["resolver", "tool"])
async def test_a_consumer_cancelled_inside_an_ask_or_a_tool_still_records_its_outcome_before_the_pair(
    held_part: Literal["resolver", "tool"],
) -> None:
    held = Held()
    executed: list[str] = []

    async def resolve(request: PermissionRequest, signal: AbortSignal) -> object:
        return await held.wait()

    async def act(params: dict[str, object], context: object = None) -> object:
        executed.append("act")
        return await held.wait()

    store = MemoryEventStore()
    runtime = MinimalAgentRuntime()
    stream = runtime.run(
        make_input(
            FakeModel([tool_turn(("m1", "act", {})), ScriptedTurn(content="never")]),
            store,
            tools=registry(pure_tool("act", act)),
            permission=AskController(resolve) if held_part == "resolver" else None,
        )
    )
    seen = await _cancel_the_consumer_inside_its_step(stream, held)
    assert held.ended == ["cancelled"]
    assert list(store.events[: len(seen)]) == seen
    tail = types(store.events)[types(store.events).index("policy.decision") + 1 :]
    if held_part == "resolver":
        # §8.6 step 7: cancellation while awaiting the resolver is a synthesized deny.
        assert tail == [
            "permission.requested",
            "permission.resolved",
            "tool.result",
            "message.completed",
            *PAIR,
        ]
        resolved = store.events[types(store.events).index("permission.resolved")]
        assert resolved.actor == "kernel"
        assert (d(resolved).decision, d(resolved).note) == ("deny", "run canceled while awaiting permission")
        assert executed == []
    else:
        # §8.6 step 9: a tool whose run was cancelled before it returned is TOOL_CANCELED.
        assert tail == ["tool.result", "message.completed", *PAIR]
        assert executed == ["act"]
    result = d(store.events[types(store.events).index("tool.result")])
    assert (result.ok, result.error.code) == (False, "TOOL_CANCELED")
    for event in store.events[-2:]:
        assert (d(event).status, d(event).note) == ("canceled", "run canceled")
    await runtime.cancel("run-1")  # a canceled tombstone


# ------------------------------------------------ §8.10: a cancel() that loses to a budget exceed


async def test_a_cancel_requested_during_the_forced_budget_warning_reports_the_exceeded_outcome() -> None:
    store = GatedStore("budget.warning", fail=False)
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(FakeModel(), store, budget=RuntimeBudget(max_steps=0)))
    iterator = stream.__aiter__()
    delivered = [await iterator.__anext__() for _ in range(3)]  # the admission events
    outcome: list[object] = []
    async with trio.open_nursery() as nursery:

        async def consume_all() -> None:
            while True:
                delivered.append(await iterator.__anext__())

        async def consume() -> None:
            with pytest.raises(RuntimeBudgetExceededError):
                await consume_all()

        async def cancel() -> None:
            try:
                await runtime.cancel("run-1")
                outcome.append("returned")
            except RunTerminalError as error:
                outcome.append(error.status)

        nursery.start_soon(consume)
        await store.entered.wait()  # the consumer's step appends the forced steps warning
        nursery.start_soon(cancel)
        await trio.testing.wait_all_tasks_blocked()
        store.release.set()
    # The exceed was already being recorded; the run ends budget_exceeded, and cancel() says
    # so (on main it returned as if the run had been canceled).
    assert types(store.events)[-3:] == ["budget.warning", *PAIR]
    assert d(store.events[-1]).status == "budget_exceeded"
    assert delivered == list(store.events)
    assert outcome == ["budget_exceeded"]
