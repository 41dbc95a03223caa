"""Instrumented parts for the runtime's driver state machine (``test_runtime_driver_machine.py``).

Every part the runtime calls (store, model, tools, resolver) records what it saw into one
:class:`Trace`: the durable record at that moment, what the consumer had received, whether
the consumer was inside a step. The invariants are then checked against those records, so a
test never has to guess what happened between two scheduling points.

Time is virtual (``trio.testing.MockClock(autojump_threshold=0)``): every delay is a whole
number of ``TICK`` seconds, drawn by hypothesis, so an example's interleaving is a function
of its data (trio's scheduler shuffle is seeded by hypothesis too).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

import trio

from harness_kernel.events import Event
from harness_kernel.models import (
    CompletionResponse,
    ModelEvent,
    ModelRequest,
    ResponseCompletedFrame,
    TextDeltaFrame,
    ToolCall,
    ToolCallFrame,
    Usage,
)
from harness_kernel.policy import PermissionRequest, RulePermissionController, ToolPermissionIntent
from harness_kernel.store import MemoryEventStore
from harness_tools import PureBoundary, Tool, ToolExecutionContext, create_bounded_tool, create_tool
from harness_workspace import AbortSignal

TICK = 0.001
"""One unit of virtual time, in seconds (so ``model_timeout_ms`` counts ticks)."""

USAGE = Usage(prompt_tokens=4, completion_tokens=4, total_tokens=8)
"""Every scripted response uses 8 tokens, so token budgets are easy to reason about."""

ToolName = Literal["echo", "guarded", "missing"]
ResolverKind = Literal["none", "answers", "raises", "operator"]
Decision = Literal["allow", "deny"]


async def pause(ticks: int) -> None:
    """Sleep ``ticks`` of virtual time; zero is still a checkpoint (a scheduling point)."""
    if ticks:
        await trio.sleep(ticks * TICK)
    else:
        await trio.lowlevel.checkpoint()


def delay_at(delays: Sequence[int], index: int) -> int:
    return delays[index] if index < len(delays) else 0


# ------------------------------------------------------------------ the trace


@dataclass(frozen=True)
class Snapshot:
    """What an observer outside the runtime could see at one moment."""

    seq: int
    durable: int
    failed: bool
    pair_status: str | None
    delivered: int


@dataclass(frozen=True)
class Effect:
    """One call the runtime made into a part that acts (model, resolver, tool)."""

    kind: Literal["model", "resolver", "tool"]
    key: str
    at: Snapshot
    last_durable: Event | None
    in_step: bool
    signal_aborted: bool
    terminal_attempted: bool
    appends_after_failure: int


@dataclass
class Trace:
    """The shared record of one example."""

    store: MachineStore
    seq: int = 0
    received: list[Event] = field(default_factory=list[Event])
    in_step: bool = False
    effects: list[Effect] = field(default_factory=list[Effect])
    running: dict[str, int] = field(default_factory=dict[str, int])
    started: dict[str, trio.Event] = field(default_factory=dict[str, trio.Event])
    resolver_answers: dict[str, str] = field(default_factory=dict[str, str])
    resolver_raised: set[str] = field(default_factory=set[str])
    executed: dict[str, str] = field(default_factory=dict[str, str])

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def snapshot(self) -> Snapshot:
        events = self.store.events
        pair = None
        if events and events[-1].type == "agent.stopped":
            pair = str(getattr(events[-1].data, "status", ""))
        return Snapshot(
            seq=self.next_seq(),
            durable=len(events),
            failed=self.store.failed_at is not None,
            pair_status=pair,
            delivered=len(self.received),
        )

    def effect(
        self, kind: Literal["model", "resolver", "tool"], key: str, signal: AbortSignal | None
    ) -> None:
        events = self.store.events
        self.effects.append(
            Effect(
                kind=kind,
                key=key,
                at=self.snapshot(),
                last_durable=events[-1] if events else None,
                in_step=self.in_step,
                signal_aborted=signal is not None and signal.aborted,
                terminal_attempted=any(e.type == "turn.completed" for e in self.store.attempts),
                appends_after_failure=self.store.appends_after_failure,
            )
        )

    def enter(self, kind: str) -> None:
        self.running[kind] = self.running.get(kind, 0) + 1
        self.first_start(kind).set()

    def first_start(self, kind: str) -> trio.Event:
        """Set when a part of ``kind`` (model, resolver, tool) first starts running."""
        return self.started.setdefault(kind, trio.Event())

    def leave(self, kind: str) -> None:
        self.running[kind] -= 1


# ------------------------------------------------------------------ store


AppendPoint = int | str | None
"""An append attempt: by its 0-based index, or the first attempt of an event type; for
``fail_at``, ``"held"`` is the attempt held at the gate."""


class MachineStore(MemoryEventStore):
    """A memory store whose appends take virtual time, one of which may fail or wait at a gate.

    Args:
        fail_at: The append attempt that raises ``OSError`` (after its delay).
        gate_at: The append attempt that waits until ``release`` is set.
        delays: Ticks each attempt takes, by attempt index (0 beyond the list).
    """

    def __init__(self, *, fail_at: AppendPoint, gate_at: AppendPoint, delays: Sequence[int]) -> None:
        super().__init__()
        self.fail_at = fail_at
        self.gate_at = gate_at
        self.delays = tuple(delays)
        self.attempts: list[Event] = []
        self.failed_at: int | None = None
        self.appends_after_failure = 0
        self.release = trio.Event()
        self.held = trio.Event()
        """Set once an append waits at the gate."""

    def _is(self, point: AppendPoint, index: int, event: Event) -> bool:
        if isinstance(point, str):
            return event.type == point and all(e.type != point for e in self.attempts[:index])
        return index == point

    async def append(self, event: Event) -> None:
        index = len(self.attempts)
        self.attempts.append(event)
        if self.failed_at is not None:
            self.appends_after_failure += 1
        await pause(delay_at(self.delays, index))
        held = self._is(self.gate_at, index, event)
        if held:
            self.held.set()
            await self.release.wait()
        if (held and self.fail_at == "held") or self._is(self.fail_at, index, event):
            self.failed_at = index
            raise OSError(f"disk full at append {index} ({event.type})")
        await super().append(event)


# ------------------------------------------------------------------ model


@dataclass(frozen=True)
class Turn:
    """One scripted model round: text deltas, or tool calls (by tool name)."""

    deltas: tuple[str, ...] = ()
    calls: tuple[ToolName, ...] = ()


class MachineModel:
    """A scripted ``ModelAdapter`` whose frames take virtual time; records each call as an effect.

    Rounds past the script answer a plain text ``"done"``.
    """

    def __init__(self, turns: Sequence[Turn], delays: Sequence[int], trace: Trace) -> None:
        self.turns = tuple(turns)
        self.delays = tuple(delays)
        self.trace = trace
        self.calls = 0
        self.pulls = 0

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.calls += 1
        self.trace.effect("model", str(self.calls), request.signal)
        turn = self.turns[self.calls - 1] if self.calls <= len(self.turns) else Turn(deltas=("done",))
        return self._frames(self.calls, turn)

    async def _frames(self, number: int, turn: Turn) -> AsyncIterator[ModelEvent]:
        self.trace.enter("model")
        try:
            frames: list[ModelEvent] = [TextDeltaFrame(delta=delta) for delta in turn.deltas]
            calls = tuple(
                ToolCall(id=f"m{number}-{i}", name=name, arguments={"n": i})
                for i, name in enumerate(turn.calls)
            )
            frames += [ToolCallFrame(call=call) for call in calls]
            response = CompletionResponse(
                id=f"resp-{number}",
                content="".join(turn.deltas),
                tool_calls=calls,
                usage=USAGE,
                finish_reason="tool_calls" if calls else "stop",
            )
            frames.append(ResponseCompletedFrame(response=response))
            for frame in frames:
                await pause(delay_at(self.delays, self.pulls))
                self.pulls += 1
                yield frame
        finally:
            self.trace.leave("model")


# ------------------------------------------------------------------ tools and permission


def machine_tools(
    trace: Trace, *, tool_delay: int, grant_scope: Literal["once", "run"]
) -> list[Tool[dict[str, object]]]:
    """``echo`` (pure, no ask) and ``guarded`` (pure, asks when a controller is injected)."""

    def executor(name: str):
        async def execute(params: dict[str, object], context: ToolExecutionContext | None) -> object:
            assert context is not None  # the runtime always passes one
            trace.effect("tool", context.call_id or "", context.signal)
            trace.executed[context.call_id or ""] = "started"
            trace.enter("tool")
            try:
                await pause(tool_delay)
            finally:
                trace.leave("tool")
            trace.executed[context.call_id or ""] = "returned"
            return {"tool": name, "params": params}

        return execute

    def guarded_intent(params: dict[str, object]) -> ToolPermissionIntent:
        return ToolPermissionIntent(action="tool.call", subject="guarded", scope=grant_scope)

    tools: list[Tool[dict[str, object]]] = []
    for name, authorization in (("echo", None), ("guarded", guarded_intent)):
        tool = create_tool(
            name=name,
            description=f"machine tool {name}",
            parameters=dict[str, object],
            execute=executor(name),
            authorization=authorization,
        )
        tools.append(create_bounded_tool(tool, PureBoundary()))
    return tools


class MachineResolver:
    """The operator side of asks: answers after a delay, raises, or waits for an ``answer`` action."""

    def __init__(self, kind: ResolverKind, answer: Decision, delay: int, trace: Trace) -> None:
        self.kind = kind
        self.answer: Decision = answer
        self.delay = delay
        self.trace = trace
        self.waiting: list[tuple[str, trio.Event]] = []
        self.operator_answers: dict[str, Decision] = {}

    async def __call__(self, request: PermissionRequest, signal: AbortSignal) -> Decision:
        key = request.permission_id
        decision: Decision
        self.trace.effect("resolver", key, signal)
        self.trace.enter("resolver")
        try:
            if self.kind == "operator":
                answered = trio.Event()
                entry = (key, answered)
                self.waiting.append(entry)
                try:
                    await answered.wait()
                finally:
                    if entry in self.waiting:
                        self.waiting.remove(entry)
                decision = self.operator_answers[key]
            else:
                await pause(self.delay)
                if self.kind == "raises":
                    self.trace.resolver_raised.add(key)
                    raise RuntimeError("resolver broke")
                decision = self.answer
        finally:
            self.trace.leave("resolver")
        self.trace.resolver_answers[key] = decision
        return decision

    def answer_oldest(self, decision: Literal["allow", "deny"]) -> bool:
        """The operator answers the oldest waiting request; False when none waits."""
        if not self.waiting:
            return False
        key, answered = self.waiting.pop(0)
        self.operator_answers[key] = decision
        answered.set()
        return True


def machine_controller(resolver: MachineResolver | None) -> RulePermissionController:
    """``guarded`` asks; everything else is allowed."""
    return RulePermissionController(
        {"tool.call": {"guarded": "ask", "*": "allow"}},
        resolve=resolver,
    )
