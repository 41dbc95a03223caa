"""MinimalAgentRuntime edge paths: double terminal faults, cancellation at the resolver, cancelled controls.

Spec §8.4 (delivery, ``aclose``), §8.6 step 7 (asks), §8.9 (terminal pair, single retry), §8.10 (cancel).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

import pytest
import trio
import trio.testing
from runtime_helpers import AskController, Ids, d, make_input, pure_tool, registry, tool_turn, types

from harness_kernel.events import Event
from harness_kernel.models import FakeModel, ModelRequest, ScriptedTurn
from harness_kernel.policy import PermissionRequest
from harness_kernel.runtime import (
    AgentRuntimeError,
    EventAppendError,
    InvalidRunInputError,
    MinimalAgentRuntime,
    ModelStreamError,
    RunAlreadyExistsError,
    RunStream,
    RunTerminalError,
)
from harness_kernel.store import MemoryEventStore
from harness_workspace import AbortController, AbortSignal

PAIR = ["turn.completed", "agent.stopped"]
Control = Literal["cancel", "aclose"]


# ------------------------------------------------------------------ helpers


class Stalling:
    """A model whose first pull never returns (run cancellation ends it)."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[object]:
        await trio.sleep_forever()
        yield  # pragma: no cover


class FaultyClock(Ids):
    """Once armed, the listed ``now()`` calls (0-based, counted from arming) misbehave.

    ``bad="raise"`` raises ``RuntimeError("clock broke N")``; ``bad="non-str"`` returns an int.
    """

    def __init__(self, bad: str, fail_on: frozenset[int]) -> None:
        super().__init__()
        self.bad = bad
        self.fail_on = fail_on
        self.armed = False
        self._since_armed = 0

    def now(self) -> str:
        if self.armed:
            index = self._since_armed
            self._since_armed += 1
            if index in self.fail_on:
                self.calls.append("now!")
                if self.bad == "raise":
                    raise RuntimeError(f"clock broke {index}")
                return 123  # pyright: ignore[reportReturnType]
        return super().now()


class RecordingStore(MemoryEventStore):
    """Records every append attempt; fails every attempt of ``fail_types``; can hold one type at a gate."""

    def __init__(self, fail_types: tuple[str, ...] = (), gate_type: str | None = None) -> None:
        super().__init__()
        self.fail_types = fail_types
        self.gate_type = gate_type
        self.attempts: list[Event] = []
        self.entered = trio.Event()
        self.release = trio.Event()

    async def append(self, event: Event) -> None:
        self.attempts.append(event)
        if event.type in self.fail_types:
            raise OSError(f"disk full at {event.type}")
        if event.type == self.gate_type and not self.release.is_set():
            self.entered.set()
            await self.release.wait()
        await super().append(event)

    def attempted(self, event_type: str) -> list[Any]:
        return [d(e) for e in self.attempts if e.type == event_type]


async def step_until(stream: RunStream, event_type: str) -> list[Event]:
    """Claim the stream and step it until an event of ``event_type`` has been delivered."""
    iterator = stream.__aiter__()
    seen: list[Event] = []
    while not seen or seen[-1].type != event_type:
        seen.append(await iterator.__anext__())
    return seen


async def rest(stream: RunStream) -> tuple[list[Event], BaseException | None]:
    """Step an already claimed stream to its end: (events, the error raised instead of stopping)."""
    events: list[Event] = []
    while True:
        try:
            events.append(await stream.__anext__())
        except StopAsyncIteration:
            return events, None
        except Exception as raised:
            with pytest.raises(StopAsyncIteration):  # the typed error is raised once
                await stream.__anext__()
            return events, raised


def control(runtime: MinimalAgentRuntime, stream: RunStream, which: Control) -> Callable[[], Awaitable[None]]:
    if which == "cancel":
        return lambda: runtime.cancel("run-1")
    return stream.aclose


def assert_one_canceled_pair(store: MemoryEventStore) -> None:
    assert types(store.events).count("turn.completed") == 1
    assert types(store.events).count("agent.stopped") == 1
    assert types(store.events)[-2:] == PAIR
    for event in store.events[-2:]:
        assert (d(event).status, d(event).note) == ("canceled", "run canceled")


# ------------------------------------------------------------------ §8.9: the single retry, and no more


FAULTS = [
    pytest.param(
        frozenset({0, 1}), ["evt", "now!", "evt", "now!"], id="turn.completed-then-retry-turn.completed"
    ),
    pytest.param(
        frozenset({1, 2}),
        ["evt", "now", "evt", "now!", "evt", "now!"],
        id="agent.stopped-then-retry-turn.completed",
    ),
    pytest.param(
        frozenset({0, 2}),
        ["evt", "now!", "evt", "now", "evt", "now!"],
        id="turn.completed-then-retry-agent.stopped",
    ),
]


@pytest.mark.parametrize(("fail_on", "tail"), FAULTS)
@pytest.mark.parametrize("bad", ["raise", "non-str"])
async def test_a_terminal_pair_whose_construction_fails_twice_writes_no_pair_and_fails_the_run(
    bad: str, fail_on: frozenset[int], tail: list[str]
) -> None:
    clock = FaultyClock(bad, fail_on)
    store = MemoryEventStore()
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(FakeModel([ScriptedTurn(content="a")]), store, ids=clock))
    async with stream:
        events = await step_until(stream, "model.request")
        while not (events[-1].type == "message.completed" and d(events[-1]).role == "assistant"):
            events.append(await stream.__anext__())
        clock.armed = True
        more, error = await rest(stream)
    # Nothing after the assistant message: the retry is the last attempt, and no event of a
    # half-built pair is ever appended or delivered.
    assert more == []
    assert list(store.events) == events
    assert not set(PAIR) & set(types(store.events))
    # One failed construction, one retry (as failed), then nothing: no third attempt.
    assert clock.calls[-len(tail) :] == tail
    assert clock.calls.count("now!") == 2
    # The consumer gets the first fault, mapped as §8.9 says (the spec does not say which
    # fault wins when the retry fails too; the runtime keeps the first one).
    assert isinstance(error, AgentRuntimeError)
    if bad == "raise":
        assert type(error) is ModelStreamError
        assert error.message == "terminal event construction failed"
        assert isinstance(error.__cause__, RuntimeError)
        assert str(error.__cause__) == f"clock broke {min(fail_on)}"
    else:
        assert type(error) is InvalidRunInputError
        assert error.message == "now() must return a str"
    # The run is a failed tombstone (§8.1, §8.10).
    with pytest.raises(RunTerminalError) as raised:
        await runtime.cancel("run-1")
    assert raised.value.status == "failed"
    with pytest.raises(RunTerminalError):
        await runtime.steer("run-1", "too late")
    with pytest.raises(RunAlreadyExistsError):
        runtime.run(make_input(FakeModel(), MemoryEventStore()))


@pytest.mark.parametrize("which", ["cancel", "aclose"])
async def test_a_control_driven_pair_that_fails_to_build_twice_writes_no_pair(which: Control) -> None:
    clock = FaultyClock("raise", frozenset({0, 1}))
    store = MemoryEventStore()
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(Stalling(), store, ids=clock))
    delivered = await step_until(stream, "model.request")
    clock.armed = True
    outcome: BaseException | None = None
    try:
        await control(runtime, stream, which)()
    except AgentRuntimeError as raised:
        outcome = raised
    if which == "aclose":
        assert outcome is None  # aclose raises only EventAppendError (§8.4)
    assert list(store.events) == delivered
    assert clock.calls[-4:] == ["evt", "now!", "evt", "now!"]
    assert clock.calls.count("now!") == 2
    with pytest.raises(RunTerminalError) as raised:
        await runtime.cancel("run-1")
    assert raised.value.status == "failed"
    if which == "cancel":
        # The consumer, still attached, gets the failure and nothing else.
        more, error = await rest(stream)
        assert more == []
        assert isinstance(error, ModelStreamError)
        assert error.message == "terminal event construction failed"


async def test_cancel_raises_when_the_canceled_pair_could_not_be_built_even_once() -> None:
    clock = FaultyClock("raise", frozenset({0, 1}))
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(Stalling(), MemoryEventStore(), ids=clock))
    await step_until(stream, "model.request")
    clock.armed = True
    # §8.10: cancel() drives the terminal pair, then "return, or raise its failure".
    with pytest.raises(ModelStreamError):
        await runtime.cancel("run-1")


@pytest.mark.parametrize("which", ["consumer", "cancel", "aclose"])
@pytest.mark.parametrize("fail_type", PAIR)
async def test_a_terminal_append_failure_is_never_retried(
    fail_type: str, which: Literal["consumer", "cancel", "aclose"]
) -> None:
    store = RecordingStore(fail_types=(fail_type,))
    runtime = MinimalAgentRuntime()
    model: object = FakeModel([ScriptedTurn(content="a")]) if which == "consumer" else Stalling()
    stream = runtime.run(make_input(model, store))
    if which == "consumer":
        delivered, error = [], None
        async with stream:
            delivered, error = await rest(stream.__aiter__())
        expected_status = "completed"
    else:
        delivered = await step_until(stream, "model.request")
        with pytest.raises(EventAppendError) as raised:
            await control(runtime, stream, which)()
        error = raised.value
        expected_status = "canceled"
        if which == "cancel":
            more, consumer_error = await rest(stream)
            delivered += more
            assert consumer_error is error  # the consumer gets it after the queued events
    assert isinstance(error, EventAppendError)
    assert error.event_type == fail_type
    assert isinstance(error.__cause__, OSError)
    # Exactly one attempt at the failing event; nothing after it; never a retried "failed" pair.
    assert len(store.attempted(fail_type)) == 1
    assert [t.status for t in store.attempted("turn.completed")] == [expected_status]
    assert len(store.attempted("agent.stopped")) == (1 if fail_type == "agent.stopped" else 0)
    assert store.attempts[-1].type == fail_type
    assert "agent.stopped" not in types(store.events)
    assert types(store.events).count("turn.completed") == (1 if fail_type == "agent.stopped" else 0)
    if which != "aclose":
        assert delivered == list(store.events)
    with pytest.raises(RunTerminalError):
        await runtime.cancel("run-1")


async def test_a_retried_pair_whose_append_fails_is_not_retried_again() -> None:
    clock = FaultyClock("raise", frozenset({0}))
    store = RecordingStore(fail_types=("turn.completed",))
    stream = MinimalAgentRuntime().run(make_input(FakeModel([ScriptedTurn(content="a")]), store, ids=clock))
    async with stream:
        events = await step_until(stream, "message.completed")
        while not (events[-1].type == "message.completed" and d(events[-1]).role == "assistant"):
            events.append(await stream.__anext__())
        clock.armed = True
        more, error = await rest(stream)
    assert more == []
    assert isinstance(error, EventAppendError)
    assert error.event_type == "turn.completed"
    assert isinstance(error.__cause__, OSError)
    # The construction fault was retried once as failed; that pair's append failed; end.
    attempted = store.attempted("turn.completed")
    assert [(t.status, t.note) for t in attempted] == [("failed", "terminal event construction failed")]
    assert store.attempted("agent.stopped") == []
    assert clock.calls[-6:] == ["evt", "now!", "evt", "now", "evt", "now"]
    assert list(store.events) == events


# ------------------------------------------------------------------ §8.6 step 7: cancellation at the resolver


class Resolver:
    """Records each call (and whether the run signal was already aborted) and how it ended."""

    def __init__(self, kind: Literal["waits", "answers at once"]) -> None:
        self.kind = kind
        self.aborted_at_call: list[bool] = []
        self.outcomes: list[str] = []

    async def __call__(self, request: PermissionRequest, signal: AbortSignal) -> object:
        self.aborted_at_call.append(signal.aborted)
        if self.kind == "answers at once":
            self.outcomes.append("answered allow")
            return "allow"
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.outcomes.append("cancelled")
            raise
        raise AssertionError("unreachable")  # pragma: no cover


class AskRun:
    """A run whose single tool call is an ask; the tool records executions."""

    def __init__(self, resolver: Resolver, **overrides: Any) -> None:
        self.executed: list[object] = []

        async def act(params: dict[str, object], context: object = None) -> object:
            self.executed.append(params)
            return {"done": True}

        self.model = FakeModel([tool_turn(("m1", "act", {})), ScriptedTurn(content="never")])
        self.store = MemoryEventStore()
        self.runtime = MinimalAgentRuntime()
        self.stream = self.runtime.run(
            make_input(
                self.model,
                self.store,
                tools=registry(pure_tool("act", act)),
                permission=AskController(resolver),
                **overrides,
            )
        )

    def assert_canceled_at_the_ask(self, delivered: list[Event]) -> None:
        start = types(delivered).index("permission.requested")
        assert types(delivered)[start:] == [
            "permission.requested",
            "permission.resolved",
            "tool.result",
            "message.completed",
            *PAIR,
        ]
        resolved = delivered[start + 1]
        assert resolved.actor == "kernel"
        assert (d(resolved).decision, d(resolved).note) == ("deny", "run canceled while awaiting permission")
        result = d(delivered[start + 2])
        assert (result.ok, result.error.code, result.error.message) == (
            False,
            "TOOL_CANCELED",
            "tool canceled",
        )
        assert d(delivered[start + 3]).role == "tool"
        assert delivered == list(self.store.events)
        assert_one_canceled_pair(self.store)
        assert self.executed == []  # no tool effect
        assert len(self.model.requests) == 1  # and no further round


def assert_resolver_never_answered(resolver: Resolver) -> None:
    """Either never called, or called once and cancelled (or its answer ignored)."""
    assert len(resolver.aborted_at_call) <= 1
    if resolver.kind == "waits":
        assert resolver.outcomes == ["cancelled"] * len(resolver.aborted_at_call)


@pytest.mark.parametrize("kind", ["waits", "answers at once"])
async def test_an_input_signal_abort_seen_between_the_ack_and_the_resolver_call_cancels_the_ask(
    kind: Literal["waits", "answers at once"],
) -> None:
    # The abort happens while the producer waits for the acknowledgement of
    # permission.requested; it is observed only once that acknowledgement resumes the
    # producer, i.e. exactly between the acknowledgement and the resolver call (§8.10).
    resolver = Resolver(kind)
    caller = AbortController()
    run = AskRun(resolver, signal=caller.signal)
    async with run.stream:
        delivered = await step_until(run.stream, "permission.requested")
        caller.abort("caller gave up")
        more, error = await rest(run.stream)
    assert error is None
    run.assert_canceled_at_the_ask(delivered + more)
    assert_resolver_never_answered(resolver)
    await run.runtime.cancel("run-1")  # a canceled tombstone


@pytest.mark.parametrize("kind", ["waits", "answers at once"])
async def test_cancel_after_permission_requested_is_delivered_drives_the_ask_to_a_canceled_end(
    kind: Literal["waits", "answers at once"],
) -> None:
    resolver = Resolver(kind)
    run = AskRun(resolver)
    async with run.stream:
        delivered = await step_until(run.stream, "permission.requested")
        await run.runtime.cancel("run-1")  # no consumer step: cancel() drives, unacknowledged
        assert types(run.store.events)[-2:] == PAIR
        more, error = await rest(run.stream)
    assert error is None
    run.assert_canceled_at_the_ask(delivered + more)
    assert_resolver_never_answered(resolver)
    assert all(resolver.aborted_at_call)  # if called at all, the run signal was already aborted


async def test_cancel_racing_the_consumers_acknowledgement_of_permission_requested() -> None:
    """cancel() lands inside the consumer's acknowledging step, before the resolver is called.

    The only scheduling point between the acknowledgement (``__anext__``) and the resolver call
    is the driver-lock checkpoint, and trio orders the two ready tasks at random; so the
    scenario is repeated until the cancellation was seen to win that race (p = 1/2 each), and
    every repetition, whichever way it went, must end the same way.
    """
    windows = 0
    for _ in range(64):
        resolver = Resolver("waits")
        run = AskRun(resolver)
        go = trio.Event()
        delivered: list[Event] = []
        async with trio.open_nursery() as nursery:

            async def cancel_when_told(run: AskRun = run, go: trio.Event = go) -> None:
                await go.wait()
                await run.runtime.cancel("run-1")

            nursery.start_soon(cancel_when_told)
            async with run.stream:
                async for event in run.stream:
                    delivered.append(event)
                    if event.type == "permission.requested":
                        go.set()  # cancel() becomes ready; the loop's __anext__ acknowledges
        run.assert_canceled_at_the_ask(delivered)
        assert_resolver_never_answered(resolver)
        if not resolver.aborted_at_call or resolver.aborted_at_call[0]:
            windows += 1  # the cancellation preceded the resolver call
            if windows >= 2:
                break
    assert windows >= 2


# ------------------------------------------------------------------ §8.4, §8.10: a cancelled control


@pytest.mark.parametrize("which", ["cancel", "aclose"])
async def test_a_control_cancelled_inside_its_terminal_append_finishes_the_pair_then_propagates(
    which: Control,
) -> None:
    store = RecordingStore(gate_type="turn.completed")
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(Stalling(), store))
    delivered = await step_until(stream, "model.request")
    returned: list[bool] = []
    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:

        async def drive() -> None:
            with scope:
                await control(runtime, stream, which)()
                returned.append(True)

        nursery.start_soon(drive)
        await store.entered.wait()
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert not scope.cancelled_caught  # the started append is shielded: still pending
        assert "turn.completed" not in types(store.events)
        store.release.set()
    assert scope.cancelled_caught
    assert returned == []
    assert_one_canceled_pair(store)
    assert list(store.events) == [*delivered, *store.events[-2:]]
    more, error = await rest(stream)
    assert error is None
    assert types(more) == (PAIR if which == "cancel" else [])
    await runtime.cancel("run-1")  # a canceled tombstone
    await stream.aclose()  # no-op


@pytest.mark.parametrize("which", ["cancel", "aclose"])
async def test_a_control_cancelled_while_waiting_for_the_consumers_step_leaves_the_step_to_finish(
    which: Control,
) -> None:
    store = RecordingStore(gate_type="message.delta")
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(FakeModel([ScriptedTurn(text_deltas=["a", "b"])]), store))
    delivered = await step_until(stream, "model.request")
    scope = trio.CancelScope()
    after: list[Event] = []
    async with trio.open_nursery() as nursery:

        async def consume() -> None:
            more, error = await rest(stream)
            assert error is None
            after.extend(more)

        nursery.start_soon(consume)
        await store.entered.wait()  # the consumer's step holds the driver, inside an append

        async def drive() -> None:
            with scope:
                await control(runtime, stream, which)()

        nursery.start_soon(drive)
        await trio.testing.wait_all_tasks_blocked()
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert scope.cancelled_caught  # propagated to the control's task
        assert "turn.completed" not in types(store.events)
        store.release.set()
    assert_one_canceled_pair(store)
    assert types(store.events)[len(delivered) :] == ["message.delta", *PAIR]
    if which == "cancel":
        assert [*delivered, *after] == list(store.events)
    else:
        assert after == []  # abandoned: the rest is dropped unseen


async def test_cancel_from_a_cancelled_task_propagates_and_the_consumer_still_ends_canceled() -> None:
    store = MemoryEventStore()
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(Stalling(), store))
    delivered = await step_until(stream, "model.request")
    with trio.CancelScope() as scope:
        scope.cancel()
        await runtime.cancel("run-1")
    assert scope.cancelled_caught
    more, error = await rest(stream)
    assert error is None
    assert types(more) == PAIR
    assert [*delivered, *more] == list(store.events)
    assert_one_canceled_pair(store)
    await runtime.cancel("run-1")


async def test_async_with_exited_by_a_trio_timeout_still_persists_the_canceled_pair(
    autojump_clock: trio.testing.MockClock,
) -> None:
    store = MemoryEventStore()
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(Stalling(), store))
    with trio.move_on_after(5) as timeout:
        async with stream:
            async for event in stream:
                if event.type == "model.request":
                    await trio.sleep_forever()  # busy outside __anext__ when the deadline hits
    assert timeout.cancelled_caught
    await stream.aclose()  # idempotent
    # §8.4: aclose() is abandonment; the canceled terminal pair is still persisted (unseen).
    assert types(store.events)[-2:] == PAIR
    assert_one_canceled_pair(store)


class SlowToLetGo(Resolver):
    """Shields its own bookkeeping for 2 s (§8.5: the runtime never abandons a task), then awaits."""

    async def __call__(self, request: PermissionRequest, signal: AbortSignal) -> object:
        self.aborted_at_call.append(signal.aborted)
        with trio.CancelScope(shield=True):
            await trio.sleep(2)
        self.outcomes.append("left its shield")
        await trio.lowlevel.checkpoint()
        return "allow"  # pragma: no cover


async def _cancel_with_deadline_while_driving_the_resolver() -> tuple[AskRun, trio.CancelScope, list[Event]]:
    resolver = SlowToLetGo("waits")
    run = AskRun(resolver)
    delivered = await step_until(run.stream, "permission.requested")
    with trio.move_on_after(1) as deadline:
        await run.runtime.cancel("run-1")  # drives the ask: the resolver holds it past the deadline
    return run, deadline, delivered


async def test_a_cancel_caller_cancelled_while_driving_the_resolver_still_ends_with_one_pair(
    autojump_clock: trio.testing.MockClock,
) -> None:
    run, deadline, _ = await _cancel_with_deadline_while_driving_the_resolver()
    assert deadline.cancelled_caught
    assert_one_canceled_pair(run.store)
    assert run.executed == []
    await run.runtime.cancel("run-1")  # a canceled tombstone
    await run.stream.aclose()


async def test_a_cancel_caller_cancelled_while_driving_the_resolver_does_not_abandon_the_consumer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    run, _, delivered = await _cancel_with_deadline_while_driving_the_resolver()
    more, error = await rest(run.stream)
    assert error is None
    # §8.4: every durable event is delivered in append order; a canceled run stops after its pair.
    assert types(more)[-2:] == PAIR
    assert [*delivered, *more] == list(run.store.events)
