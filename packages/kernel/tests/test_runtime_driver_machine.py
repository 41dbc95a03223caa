"""A hypothesis state machine over ``MinimalAgentRuntime``'s driver (spec §8.4, §8.9, §8.10; issue #16).

Each example builds one run with a random valid configuration (scripted model rounds with
text deltas and tool calls, a pure tool and a tool that asks, a resolver that answers late,
raises or waits for an operator, a store that may fail or hold one append, budgets, a model
deadline) and lets several trio tasks act on it at random virtual times: the consumer
stepping ``__anext__`` (stopping early, inside ``async with`` or not), ``steer``,
``cancel``, ``aclose``, the operator answering an ask, the store's gate opening, the input
signal aborting, and trio cancellation of any of those callers. Everything that acts records
what was durable and delivered at that moment (``runtime_machine_parts``), and the
invariants are checked against those records after every example.

The whole interleaving is a function of the example's data: delays are virtual ticks of a
``MockClock(autojump_threshold=0)``, and trio's scheduler shuffle is seeded by hypothesis
(pytest-trio registers trio's random with it). The CI run is derandomized (the same 2,000
examples every time, so CI is stable); the ``slow`` run explores fresh examples and prints a
``@reproduce_failure`` blob for any failure.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, Literal, cast

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from runtime_helpers import Ids, registry
from runtime_machine_parts import (
    TICK,
    AppendPoint,
    MachineModel,
    MachineResolver,
    MachineStore,
    ResolverKind,
    Snapshot,
    ToolName,
    Trace,
    Turn,
    delay_at,
    machine_controller,
    machine_tools,
    pause,
)

from harness_kernel.events import Event
from harness_kernel.runtime import (
    EventAppendError,
    MinimalAgentRuntime,
    ModelStreamError,
    ModelTimeoutError,
    RunInput,
    RunStream,
    RunTerminalError,
    RuntimeBudget,
    RuntimeBudgetExceededError,
    SteeringClosedError,
)
from harness_workspace import AbortController

RUN_ID: Final = "run-1"
PAIR: Final = ("turn.completed", "agent.stopped")
FINISHED: Final = frozenset({"completed", "failed", "canceled", "budget_exceeded"})
END_TICKS: Final = 2_000
"""When the janitor opens the gate and closes the stream (after every planned action)."""
WATCHDOG_TICKS: Final = 20_000
"""A run still busy this long after the janitor's ``aclose`` has hung."""

ActionKind = Literal["steer", "cancel", "aclose", "allow", "deny", "release", "abort"]
Trigger = Literal["time", "model", "resolver", "tool"]
"""When a caller is cancelled: at a time, or just after a part of that kind starts running."""
TIME: Final[Trigger] = "time"
# Resolvers and tools twice: a cancellation there must still record the ask and the call.
PARTS: Final[tuple[Trigger, ...]] = ("model", "resolver", "resolver", "tool", "tool")
CANCELED_ASK: Final = "run canceled while awaiting permission"


# ------------------------------------------------------------------ plans


@dataclass(frozen=True)
class ConsumerPlan:
    start: int
    step_delays: tuple[int, ...]
    stop_after: int | None
    async_with: bool


@dataclass(frozen=True)
class Plan:
    turns: tuple[Turn, ...]
    frame_delays: tuple[int, ...]
    max_steps: int
    max_tool_calls: int | None
    max_model_tokens: int | None
    model_timeout_ms: int | None
    controller: bool
    resolver: ResolverKind
    answer: Literal["allow", "deny"]
    resolver_delay: int
    grant_scope: Literal["once", "run"]
    tool_delay: int
    fail_at: AppendPoint
    gate_at: AppendPoint
    gate_opens_at: int | None
    append_delays: tuple[int, ...]
    signal: bool
    consumer: ConsumerPlan | None
    controls: tuple[tuple[tuple[int, ActionKind], ...], ...]
    cancels: tuple[tuple[Trigger, int, int], ...]


TICKS = st.integers(0, 6)
# ``guarded`` twice: asks are the deepest path, so they come more often.
TOOL_NAMES: tuple[ToolName, ...] = ("echo", "guarded", "guarded", "missing")
# Repeats weight the draw: gentle actions (answers, the gate, steering) come more often than
# the ones that end the run, so that runs get deep enough to ask and to run tools.
GENTLE: tuple[ActionKind, ...] = ("allow", "release", "steer", "deny")
ENDING: tuple[ActionKind, ...] = ("cancel", "aclose", "abort")
ACTIONS: tuple[ActionKind, ...] = (*GENTLE, *GENTLE, *GENTLE, *ENDING)
LATER = st.integers(0, 40)
WHEN_HELD: Final = -1
"""A control's delay that means: act once an append waits at the store's gate."""
DELAYS = st.one_of(LATER, st.just(WHEN_HELD))
# The appends where races end runs: the terminal pair, the warning before an exceed, an ask
# (the first two twice: a control arriving while they are held has found real bugs).
POINTS: tuple[str, ...] = (
    "turn.completed",
    "turn.completed",
    "agent.stopped",
    "budget.warning",
    "budget.warning",
    "permission.requested",
    "permission.resolved",
    "tool.result",
    "model.request",
    "steering.queued",
)
FAIL_POINTS = st.one_of(st.none(), st.none(), st.integers(0, 30), st.sampled_from(POINTS), st.just("held"))

text_turns = st.builds(Turn, deltas=st.lists(st.sampled_from(["a", "bc", "d"]), max_size=3).map(tuple))
tool_turns = st.builds(
    Turn,
    deltas=st.just(()),
    calls=st.lists(st.sampled_from(TOOL_NAMES), min_size=1, max_size=2).map(tuple),
)
consumer_plans = st.builds(
    ConsumerPlan,
    start=TICKS,
    step_delays=st.lists(TICKS, max_size=12).map(tuple),
    stop_after=st.one_of(st.none(), st.none(), st.none(), st.integers(0, 30)),
    async_with=st.booleans(),
)


def cancels(actors: int) -> st.SearchStrategy[tuple[Trigger, int, int]]:
    """A caller's cancellation: at 0..150 ticks, or 0..3 ticks after a part starts."""
    actor = st.integers(0, actors - 1)
    time: st.SearchStrategy[Trigger] = st.just(TIME)
    part: st.SearchStrategy[Trigger] = st.sampled_from(PARTS)
    at_a_time = st.tuples(time, st.integers(0, 150), actor)
    inside_a_part = st.tuples(part, st.integers(0, 3), actor)
    return st.one_of(at_a_time, inside_a_part)


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    controls = tuple(
        tuple(draw(st.lists(st.tuples(DELAYS, st.sampled_from(ACTIONS)), max_size=4)))
        for _ in range(draw(st.integers(0, 3)))
    )
    # One example in ten has no consumer: only the controls (and the janitor) drive the run,
    # and the model is never called (it is pulled only inside a consumer step).
    consumer = None if controls and draw(st.integers(0, 9)) == 9 else draw(consumer_plans)
    actors = 1 + len(controls)
    return Plan(
        turns=tuple(draw(st.lists(st.one_of(tool_turns, tool_turns, text_turns), min_size=1, max_size=3))),
        frame_delays=tuple(draw(st.lists(TICKS, max_size=10))),
        max_steps=draw(st.sampled_from([8, 8, 3, 2, 1, 0])),
        max_tool_calls=draw(st.sampled_from([None, 2, 1])),
        max_model_tokens=draw(st.sampled_from([None, 30, 12, 8])),
        model_timeout_ms=draw(st.sampled_from([60_000, None, 60_000, 20, 3])),
        controller=draw(st.sampled_from([True, True, True, False])),
        resolver=draw(st.sampled_from(["answers", "operator", "raises", "none"])),
        answer=draw(st.sampled_from(["allow", "deny"])),
        resolver_delay=draw(LATER),
        grant_scope=draw(st.sampled_from(["once", "run"])),
        tool_delay=draw(LATER),
        fail_at=draw(FAIL_POINTS),
        gate_at=draw(st.one_of(st.none(), st.integers(0, 30), st.sampled_from(POINTS))),
        gate_opens_at=draw(st.one_of(LATER, LATER, st.none())),
        append_delays=tuple(draw(st.lists(TICKS, max_size=30))),
        signal=draw(st.booleans()),
        consumer=consumer,
        controls=controls,
        cancels=tuple(draw(st.lists(cancels(actors), max_size=2))),
    )


# ------------------------------------------------------------------ one example


@dataclass
class Call:
    """One public call made by an actor, with what an observer saw before and after it."""

    actor: str
    action: str
    at_start: Snapshot
    at_end: Snapshot | None = None
    outcome: object = None
    text: str | None = None
    own_scope_cancelled: bool = False


@dataclass
class Receipt:
    event: Event
    index: int
    durable_at_receipt: bool


@dataclass
class Example:
    """One run and the actors acting on it."""

    plan: Plan
    trace: Trace = field(init=False)
    calls: list[Call] = field(default_factory=list[Call])
    receipts: list[Receipt] = field(default_factory=list[Receipt])
    scopes: dict[str, trio.CancelScope] = field(default_factory=dict[str, trio.CancelScope])
    steer_count: int = 0

    def __post_init__(self) -> None:
        plan = self.plan
        self.store = MachineStore(fail_at=plan.fail_at, gate_at=plan.gate_at, delays=plan.append_delays)
        self.trace = Trace(self.store)
        self.model = MachineModel(plan.turns, plan.frame_delays, self.trace)
        self.resolver = MachineResolver(plan.resolver, plan.answer, plan.resolver_delay, self.trace)
        self.abort = AbortController()
        self.runtime = MinimalAgentRuntime()
        ids = Ids()
        self.stream: RunStream = self.runtime.run(
            RunInput(
                run_id=RUN_ID,
                session_id="sess-1",
                turn_id="turn-1",
                input="hello",
                model="machine-model",
                model_adapter=self.model,
                event_store=self.store,
                tools=registry(
                    *machine_tools(self.trace, tool_delay=plan.tool_delay, grant_scope=plan.grant_scope)
                ),
                permission=(
                    machine_controller(None if plan.resolver == "none" else self.resolver)
                    if plan.controller
                    else None
                ),
                budget=RuntimeBudget(
                    max_steps=plan.max_steps,
                    max_model_tokens=plan.max_model_tokens,
                    max_tool_calls=plan.max_tool_calls,
                ),
                model_timeout_ms=plan.model_timeout_ms,
                signal=self.abort.signal if plan.signal else None,
                now=ids.now,
                new_id=ids.new_id,
            )
        )

    # -------------------------------------------------------------- calls

    async def call(
        self, actor: str, action: str, make: Callable[[], Awaitable[object]], text: str | None = None
    ) -> Call:
        """Make one public call, recording its outcome; a ``trio.Cancelled`` is re-raised."""
        record = Call(actor, action, self.trace.snapshot(), text=text)
        self.calls.append(record)
        try:
            record.outcome = await make()
        except trio.Cancelled as cancelled:
            record.outcome = cancelled
            record.own_scope_cancelled = self.scopes[actor].cancel_called
            raise
        except (Exception, StopAsyncIteration) as raised:
            record.outcome = raised
        finally:
            record.at_end = self.trace.snapshot()
        return record

    async def step(self, iterator: RunStream) -> Call:
        self.trace.in_step = True
        try:
            record = await self.call("consumer", "step", iterator.__anext__)
        finally:
            self.trace.in_step = False
        if isinstance(record.outcome, Event):
            index = len(self.trace.received)
            events = self.store.events
            durable = index < len(events) and events[index] == record.outcome
            self.receipts.append(Receipt(record.outcome, index, durable))
            self.trace.received.append(record.outcome)
        return record

    # -------------------------------------------------------------- actors

    async def consumer(self, plan: ConsumerPlan) -> None:
        with self.scopes["consumer"]:
            await pause(plan.start)
            iterator = self.stream.__aiter__()
            try:
                for number in range(500):
                    if plan.stop_after is not None and number >= plan.stop_after:
                        break
                    await pause(delay_at(plan.step_delays, number))
                    record = await self.step(iterator)
                    if isinstance(record.outcome, StopAsyncIteration):
                        break
                    if isinstance(record.outcome, Exception):
                        await self.step(iterator)  # the typed error is raised once, then the end
                        break
            finally:
                if plan.async_with:
                    await self.call("consumer", "exit", lambda: self.stream.__aexit__(None, None, None))

    async def control(self, name: str, actions: tuple[tuple[int, ActionKind], ...]) -> None:
        with self.scopes[name]:
            for delay, action in actions:
                if delay == WHEN_HELD:
                    with trio.move_on_after(END_TICKS * TICK):
                        await self.store.held.wait()
                else:
                    await pause(delay)
                await self.act(name, action)

    async def act(self, name: str, action: ActionKind) -> None:
        if action == "steer":
            self.steer_count += 1
            text = f"steer {self.steer_count}"
            await self.call(name, "steer", lambda: self.runtime.steer(RUN_ID, text), text=text)
        elif action == "cancel":
            await self.call(name, "cancel", lambda: self.runtime.cancel(RUN_ID))
        elif action == "aclose":
            await self.call(name, "aclose", self.stream.aclose)
        elif action in ("allow", "deny"):
            self.resolver.answer_oldest(action)
        elif action == "release":
            self.store.release.set()
        elif self.plan.signal:
            self.abort.abort("the caller gave up")

    async def canceller(self, trigger: Trigger, ticks: int, actor: str) -> None:
        with trio.move_on_after(END_TICKS * TICK):
            if trigger != "time":
                await self.trace.first_start(trigger).wait()
            await pause(ticks)
            self.scopes[actor].cancel()

    async def open_gate(self, at: int) -> None:
        await pause(at)
        self.store.release.set()

    async def janitor(self) -> None:
        """After every planned action: open the gate and close the stream, in a fresh task."""
        with self.scopes["janitor"]:
            await pause(END_TICKS)
            self.store.release.set()
            await self.call("janitor", "aclose", self.stream.aclose)

    async def play(self) -> None:
        plan = self.plan
        names = ["consumer", *(f"control-{i}" for i in range(len(plan.controls)))]
        self.scopes = {name: trio.CancelScope() for name in [*names, "janitor", "final"]}
        with trio.move_on_after(WATCHDOG_TICKS * TICK) as watchdog:
            async with trio.open_nursery() as nursery:
                if plan.consumer is not None:
                    nursery.start_soon(self.consumer, plan.consumer)
                for i, actions in enumerate(plan.controls):
                    nursery.start_soon(self.control, f"control-{i}", actions)
                for trigger, ticks, actor in plan.cancels:
                    nursery.start_soon(self.canceller, trigger, ticks, names[actor])
                if plan.gate_opens_at is not None:
                    nursery.start_soon(self.open_gate, plan.gate_opens_at)
                nursery.start_soon(self.janitor)
        if watchdog.cancelled_caught:
            waiting = [c for c in self.calls if c.at_end is None]
            raise AssertionError(
                f"the run hung; calls left waiting: {waiting}; running parts {self.trace.running}"
            )
        # §8.4 and the brief: a final aclose() in a fresh task, then the run is a tombstone.
        async with trio.open_nursery() as nursery:

            async def final() -> None:
                with self.scopes["final"]:
                    await self.call("final", "aclose", self.stream.aclose)

            nursery.start_soon(final)
        with trio.move_on_after(WATCHDOG_TICKS * TICK):
            self.tombstone = await self.call(
                "final", "steer", lambda: self.runtime.steer(RUN_ID, "after the end")
            )


# ------------------------------------------------------------------ invariants


def data(event: Event) -> object:
    return event.data


def field_of(event: Event, name: str) -> object:
    return getattr(event.data, name, None)


class Outcome:
    """The run's outcome as the durable record shows it."""

    def __init__(self, example: Example) -> None:
        store = example.store
        self.events = list(store.events)
        self.types = [e.type for e in self.events]
        self.failed = store.failed_at is not None
        self.status = "failed" if self.failed else str(field_of(self.events[-1], "status"))


def check_terminal_pair(example: Example, outcome: Outcome) -> None:
    """(1) one terminal pair, or after a failed append nothing at all."""
    store = example.store
    assert store.appends_after_failure == 0, "an append was attempted after a failed one"
    if outcome.failed:
        assert store.failed_at == len(store.attempts) - 1, "the failed append must be the last attempt"
        failed_type = store.attempts[-1].type
        assert "agent.stopped" not in outcome.types
        # The only terminal event that may be durable is a turn.completed whose agent.stopped failed.
        expected_turn_completed = 1 if failed_type == "agent.stopped" else 0
        assert outcome.types.count("turn.completed") == expected_turn_completed
        if expected_turn_completed:
            assert outcome.types[-1] == "turn.completed"
        return
    assert tuple(outcome.types[-2:]) == PAIR, f"no terminal pair at the end: {outcome.types[-4:]}"
    assert outcome.types.count("turn.completed") == 1
    assert outcome.types.count("agent.stopped") == 1
    assert field_of(outcome.events[-2], "status") == field_of(outcome.events[-1], "status")
    assert outcome.status in FINISHED


def check_permissions(example: Example, outcome: Outcome) -> None:
    """(2) every permission.requested is answered by the next durable event, or the store failed.

    Steers may be stored between them (issue #23: steering is open throughout the run).
    """
    events = [e for e in outcome.events if e.type != "steering.queued"]
    for i, requested in enumerate(events):
        if requested.type != "permission.requested":
            continue
        if i == len(events) - 1:
            assert outcome.failed, "permission.requested left unanswered"
            continue
        resolved = events[i + 1]
        assert resolved.type == "permission.resolved", f"permission.requested followed by {resolved.type}"
        key = field_of(requested, "permission_id")
        assert field_of(resolved, "permission_id") == key
        decision, note = field_of(resolved, "decision"), field_of(resolved, "note")
        if resolved.actor == "operator":
            assert example.trace.resolver_answers.get(str(key)) == decision
        else:
            assert decision == "deny"
            expected = {
                "no permission resolver",
                "permission resolver failed closed",
                CANCELED_ASK,
            }
            assert note in expected
            if note == "no permission resolver":
                assert example.plan.resolver == "none"
            if note == "permission resolver failed closed":
                assert str(key) in example.trace.resolver_raised


def _allows(event: Event | None, call_id: str, granted: bool) -> bool:
    if event is None or field_of(event, "call_id") != call_id:
        return False
    if event.type == "policy.decision":
        effect = field_of(event, "effect")
        return effect == "allow" or (effect == "ask" and granted)
    return event.type == "permission.resolved" and field_of(event, "decision") == "allow"


def check_effects(example: Example, outcome: Outcome) -> None:
    """(3) nothing acts after a failed append, after the terminal pair began, or before its fence."""
    events = outcome.events
    for effect in example.trace.effects:
        where = f"{effect.kind} {effect.key} at {effect.at}"
        assert not effect.at.failed, f"{where}: an effect after a failed append"
        assert effect.appends_after_failure == 0
        assert not effect.terminal_attempted, f"{where}: an effect after the terminal pair began"
        # Steering may be stored at any moment (issue #23: it is applied at the next
        # request), so an effect is judged by the last durable event that is not a steer,
        # and steers stored meanwhile need no acknowledgement before it.
        last = effect.last_durable
        durable = events[: effect.at.durable]
        if last is not None and last.type == "steering.queued":
            last = next((e for e in reversed(durable) if e.type != "steering.queued"), None)
        unseen = durable[effect.at.delivered :]
        acknowledged = effect.in_step and all(e.type == "steering.queued" for e in unseen)
        if effect.kind == "model":
            assert last is not None, where
            assert last.type == "model.request", where
            assert field_of(last, "step") == int(effect.key), where
            assert acknowledged, f"{where}: model called without its ack"
            assert not effect.signal_aborted, f"{where}: model called after the abort"
        elif effect.kind == "resolver":
            assert last is not None, where
            assert last.type == "permission.requested", where
            assert field_of(last, "permission_id") == effect.key, where
            if not effect.signal_aborted:
                assert acknowledged, f"{where}: resolver called without the ack of permission.requested"
        else:
            before = events[: effect.at.durable]
            granted = example.plan.grant_scope == "run" and any(
                e.type == "permission.resolved" and field_of(e, "decision") == "allow" for e in before
            )
            assert _allows(last, effect.key, granted), f"{where}: executed after {last and last.type}"
            assert acknowledged, f"{where}: executed without its ack"
            assert not effect.signal_aborted, f"{where}: executed after the abort"
    results = {str(field_of(e, "call_id")): e for e in events if e.type == "tool.result"}
    for call_id, state in example.trace.executed.items():
        assert call_id in results or outcome.failed, f"tool {call_id} ran but has no durable tool.result"
        if call_id in results and field_of(results[call_id], "ok"):
            assert state == "returned"
    for call_id, result in results.items():
        if field_of(result, "ok"):
            assert example.trace.executed.get(call_id) == "returned", (
                f"ok result for {call_id} never executed"
            )
    assert all(count == 0 for count in example.trace.running.values()), (
        f"parts left running: {example.trace.running}"
    )


def _aclose_started_before(example: Example, seq: int) -> bool:
    return any(c.action in ("aclose", "exit") and c.at_start.seq < seq for c in example.calls)


def check_consumer(example: Example, outcome: Outcome) -> None:
    """(4) what the consumer received is durable, in store order, with no duplicates."""
    for receipt in example.receipts:
        assert receipt.durable_at_receipt, (
            f"event {receipt.index} ({receipt.event.type}) delivered before durable"
        )
    received = example.trace.received
    assert received == outcome.events[: len(received)], "delivery is not a prefix of the durable record"
    steps = [c for c in example.calls if c.action == "step"]
    for i, step in enumerate(steps):
        result = step.outcome
        if isinstance(result, Event | trio.Cancelled):
            continue
        assert step.at_end is not None
        if isinstance(result, Exception) and not isinstance(result, StopAsyncIteration):
            later = steps[i + 1 : i + 2]
            assert all(isinstance(s.outcome, StopAsyncIteration | trio.Cancelled) for s in later), (
                "the run's error is raised once, then the stream stops"
            )
        if _aclose_started_before(example, step.at_end.seq):
            continue  # abandoned: undelivered events were dropped (§8.4)
        first_end = all(isinstance(s.outcome, Event | trio.Cancelled) for s in steps[:i])
        if not first_end:
            continue
        assert step.at_end.delivered == step.at_end.durable, (
            f"the stream ended with undelivered events ({step})"
        )
        if isinstance(result, EventAppendError):
            assert step.at_end.failed
        elif isinstance(result, StopAsyncIteration):
            assert step.at_end.pair_status in ("completed", "canceled"), f"stream stopped at {step.at_end}"
        else:
            assert step.at_end.pair_status in ("failed", "budget_exceeded"), f"{result!r} at {step.at_end}"
            assert isinstance(result, RuntimeBudgetExceededError) == (
                step.at_end.pair_status == "budget_exceeded"
            )


ALLOWED: Final[dict[str, tuple[type[BaseException], ...]]] = {
    "step": (
        StopAsyncIteration,
        EventAppendError,
        ModelStreamError,
        ModelTimeoutError,
        RuntimeBudgetExceededError,
    ),
    "steer": (RunTerminalError, SteeringClosedError, EventAppendError),
    "cancel": (RunTerminalError, EventAppendError),
    "aclose": (EventAppendError,),
    "exit": (EventAppendError,),
}


def _check_steer(call: Call, result: object, outcome: Outcome, durable: int, where: str) -> None:
    """A steer's return against the record: stored once, applied at most once; or refused, unstored."""
    if result is None:
        queued = [
            i
            for i, e in enumerate(outcome.events)
            if e.type == "steering.queued" and field_of(e, "content") == call.text
        ]
        assert len(queued) == 1, f"{where}: steering recorded {len(queued)} times"
        assert queued[0] < durable, f"{where}: steering not durable on return"
        message_id = field_of(outcome.events[queued[0]], "message_id")
        applied = [
            i
            for i, e in enumerate(outcome.events)
            if e.type == "steering.applied" and field_of(e, "message_id") == message_id
        ]
        # Applied at most once, after it was stored, right before a request; a
        # completed run applied every steer it took.
        assert len(applied) <= 1, f"{where}: steering applied {len(applied)} times"
        assert not applied or applied[0] > queued[0], where
        if applied:
            following = outcome.types[applied[0] + 1 :]
            if following:
                assert following[0] in ("steering.applied", "context.accounted", "model.request"), where
            else:
                assert outcome.failed, f"{where}: the record ends with steering.applied"
        if outcome.status == "completed":
            assert applied, f"{where}: a completed run never applied its steering"
    elif isinstance(result, SteeringClosedError | RunTerminalError):
        refused = [
            e for e in outcome.events if e.type == "steering.queued" and field_of(e, "content") == call.text
        ]
        assert not refused, f"{where}: a refused steer was stored"
        if isinstance(result, RunTerminalError):
            assert result.status in {"cancel_requested", "completing", *FINISHED}, where
            if result.status in FINISHED:
                assert result.status == outcome.status, where


def check_controls(example: Example, outcome: Outcome) -> None:
    """(5) every call returns or raises a documented error, consistent with the record."""
    model_requests = [i for i, t in enumerate(outcome.types) if t == "model.request"]
    for call in example.calls:
        if call is getattr(example, "tombstone", None):
            continue
        result, start, end = call.outcome, call.at_start, call.at_end
        assert end is not None
        where = f"{call.actor} {call.action} -> {result!r} ({start} .. {end})"
        if isinstance(result, trio.Cancelled):
            assert call.own_scope_cancelled, f"{where}: Cancelled leaked into a task nobody cancelled"
            continue
        if isinstance(result, BaseException):
            assert isinstance(result, ALLOWED[call.action]), f"{where}: undocumented error"
        if isinstance(result, EventAppendError):
            assert end.failed, where
        if call.action == "cancel":
            if result is None:
                assert end.pair_status == "canceled", f"{where}: cancel() returned before the canceled pair"
            elif isinstance(result, RunTerminalError):
                if result.status == "completing":
                    assert outcome.status != "canceled", where
                else:
                    assert result.status in FINISHED, where
                    assert result.status == outcome.status, where
        elif call.action == "steer":
            _check_steer(call, result, outcome, end.durable, where)
        elif call.action in ("aclose", "exit") and result is None:
            assert end.pair_status is not None or end.failed, f"{where}: aclose() returned with the run live"
            if not start.failed and start.pair_status is None:
                assert end.pair_status is not None, f"{where}: aclose() hid the failed terminal append"
    if model_requests:
        first = outcome.events[model_requests[0]]
        steered = outcome.types[: model_requests[0]].count("steering.queued")
        assert field_of(first, "message_count") == 1 + steered, "steering must reach the first model request"
        assert outcome.types[: model_requests[0]].count("steering.applied") == steered


def check_tombstone(example: Example, outcome: Outcome) -> None:
    """(6) the run ends: a tombstone with the durable record's status, nothing left registered."""
    tombstone = example.tombstone.outcome
    assert isinstance(tombstone, RunTerminalError), (
        f"the run is still live after the final aclose: {tombstone!r}"
    )
    assert tombstone.status == outcome.status


def note_coverage(example: Example, outcome: Outcome) -> None:
    """Label the example for ``--hypothesis-show-statistics`` (how often each path is reached)."""
    event(f"status: {outcome.status}")
    if outcome.failed:
        event(f"append failed at {example.store.attempts[-1].type}")
    if "permission.requested" in outcome.types:
        event("an ask was recorded")
    if example.trace.executed:
        event("a tool ran")
    for e in outcome.events:
        if e.type == "permission.resolved" and field_of(e, "note") == CANCELED_ASK:
            event("an ask was closed by the cancellation")
        if e.type == "tool.result" and getattr(field_of(e, "error"), "code", None) == "TOOL_CANCELED":
            event("a call was recorded as canceled")
    for call in example.calls:
        if call.actor == "final":
            continue
        if isinstance(call.outcome, trio.Cancelled):
            event(f"caller cancelled inside {call.action}")
        elif isinstance(call.outcome, BaseException) and call.action != "step":
            event(f"{call.action} raised {type(call.outcome).__name__}")


def check_example(example: Example) -> None:
    outcome = Outcome(example)
    note_coverage(example, outcome)
    check_terminal_pair(example, outcome)
    check_permissions(example, outcome)
    check_effects(example, outcome)
    check_consumer(example, outcome)
    check_controls(example, outcome)
    check_tombstone(example, outcome)


def play(plan: Plan) -> Example:
    example = cast(Example, None)

    async def main() -> None:
        nonlocal example
        example = Example(plan)
        await example.play()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return example


# ------------------------------------------------------------------ tests

MACHINE: Final = settings(
    max_examples=2_000,
    deadline=None,
    database=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def race(**changes: object) -> Plan:
    """A plan for one race the machine found: a quiet run, then ``changes``."""
    quiet = Plan(
        turns=(Turn(deltas=("a",)),),
        frame_delays=(),
        max_steps=8,
        max_tool_calls=None,
        max_model_tokens=None,
        model_timeout_ms=None,
        controller=False,
        resolver="none",
        answer="allow",
        resolver_delay=0,
        grant_scope="once",
        tool_delay=0,
        fail_at=None,
        gate_at=None,
        gate_opens_at=None,
        append_delays=(),
        signal=False,
        consumer=None,
        controls=(),
        cancels=(),
    )
    return dataclasses.replace(quiet, **changes)


CONSUMER: Final = ConsumerPlan(start=0, step_delays=(), stop_after=None, async_with=False)
# Races the random sample need not draw, kept as explicit examples (each once failed on main):
# a cancel() arriving while the canceled pair is appended, then that append fails; and a
# cancel() arriving while the warning before a steps exceed is appended.
PAIR_FAILS_UNDER_A_SECOND_CANCEL: Final = race(
    gate_at="turn.completed",
    fail_at="held",
    gate_opens_at=5,
    controls=(((0, "aclose"),), ((WHEN_HELD, "cancel"),)),
)
CANCEL_DURING_THE_FORCED_WARNING: Final = race(
    max_steps=0,
    gate_at="budget.warning",
    gate_opens_at=5,
    consumer=CONSUMER,
    controls=(((WHEN_HELD, "cancel"),),),
)


@pytest.mark.slow
@MACHINE
@example(PAIR_FAILS_UNDER_A_SECOND_CANCEL)
@example(CANCEL_DURING_THE_FORCED_WARNING)
@given(plans())
def test_the_driver_keeps_its_invariants_under_random_interleavings(plan: Plan) -> None:
    check_example(play(plan))


EXPLORE: Final = os.environ.get("HARNESS_DRIVER_MACHINE_EXAMPLES", "")


@pytest.mark.slow
@pytest.mark.skipif(not EXPLORE, reason="set HARNESS_DRIVER_MACHINE_EXAMPLES=N to explore N fresh examples")
@settings(MACHINE, max_examples=int(EXPLORE or "1"), derandomize=False)
@given(plans())
def test_the_driver_keeps_its_invariants_under_fresh_interleavings(plan: Plan) -> None:
    check_example(play(plan))
