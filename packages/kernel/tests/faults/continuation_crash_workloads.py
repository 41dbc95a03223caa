"""The continuation target's world: what the killed grandchild runs and the parent continues.

The grandchild (workload ``continuation``) runs ``MinimalAgentRuntime`` with checkpoints on a
real ``SqliteSessionStore`` file, in a session created with an owner and a lease. Its model
answers by the round a request is in; each round asks for ``calls`` calls of the ``effect``
tool, keyed ``r<round>c<call>`` by the model. The tool's effect is one line
``<key> <call id>`` appended to an effects log and fsynced before the tool returns, so an
effect can happen without its result being stored. A permission controller allows most
keys, asks about some (its resolver allows) and denies one, so ``policy.decision`` and
``permission.*`` events happen. Every event the consumer receives from the stream is
appended (fsynced) to an acknowledgement file before the next one is pulled.

``params["self_kill"] = {"point": P, "count": N}`` makes the grandchild SIGKILL itself the
N-th time it passes P: ``before-append T`` / ``after-append T`` around the durable append of
an event of type T (``T = any`` counts every event), ``before-effect`` / ``after-effect``
around the effects-log write. ``params["batched"]`` gives the runtime a store with
``append_many`` (the events of one boundary in one commit, as ``SessionEventLog`` does);
without it every event is its own commit, which a plain ``EventStore`` also may be.

The parent rebuilds the same :class:`World` to continue the turn (``continuation_crash_trials``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Final, Literal

import trio
from faults.kernel_crash_workloads import Report, SelfKill

from harness_kernel.events import Event
from harness_kernel.models import (
    AssistantMessage,
    FakeModel,
    ModelEvent,
    ModelRequest,
    ScriptedTurn,
    ToolCall,
)
from harness_kernel.policy import PermissionDecision, PermissionRequest, PermissionResolution
from harness_kernel.runtime import MinimalAgentRuntime, RunInput, RuntimeBudget
from harness_kernel.store import SessionEventLog, SqliteSessionStore
from harness_tools import (
    PureBoundary,
    Tool,
    ToolExecutionContext,
    ToolPermissionIntent,
    ToolRegistry,
    create_bounded_tool,
    create_tool,
)
from harness_workspace import AbortSignal

__all__ = [
    "EFFECT_TOOL",
    "FIRST_OWNER",
    "MODEL",
    "RUN_ID",
    "SESSION",
    "WORKLOADS",
    "RoundModel",
    "World",
    "read_effects",
]

SESSION: Final = "sess-continue"
RUN_ID: Final = "run-continue"
FIRST_OWNER: Final = "owner-first"
FIRST_LEASE_MS: Final = 60_000
"""Short against the parent's store clock, which runs an hour or more ahead."""
MODEL: Final = "fake-model/v1"
EFFECT_TOOL: Final = "effect"
Verdict = Literal["allow", "ask", "deny"]


def _effect(round_: int, call: int) -> Verdict:
    if round_ == 1 and call == 1:
        return "deny"
    return "ask" if (round_ + call) % 3 == 2 else "allow"


class World:
    """The scripted model, the tool and the permission controller of one workload shape."""

    def __init__(self, rounds: int, calls: int) -> None:
        self.rounds = rounds
        self.calls = calls
        self.effects: dict[str, Verdict] = {
            f"r{r}c{c}": _effect(r, c) for r in range(rounds) for c in range(calls)
        }

    def turn(self, answered: int) -> ScriptedTurn:
        """The model's answer to a request that follows ``answered`` assistant messages."""
        if answered >= self.rounds:
            return ScriptedTurn(content="done")
        keys = [f"r{answered}c{c}" for c in range(self.calls)]
        calls = [ToolCall(id=key, name=EFFECT_TOOL, arguments={"key": key}) for key in keys]
        return ScriptedTurn(tool_calls=calls)

    def budget(self) -> RuntimeBudget:
        """Room for every round, a re-sent request and then some: the budget never ends a trial."""
        return RuntimeBudget(max_steps=2 * (self.rounds + 2))

    def tool(
        self, effects_path: str, on_effect: Callable[[str], None] | None = None
    ) -> Tool[dict[str, object]]:
        """The ``effect`` tool: appends ``<key> <call id>`` to ``effects_path`` and fsyncs, then returns.

        ``on_effect(phase)`` is called with ``before-effect`` and ``after-effect`` around the
        write (the grandchild's self-kill points).
        """

        async def execute(params: dict[str, object], context: ToolExecutionContext | None) -> object:
            assert context is not None
            assert context.call_id is not None
            key = params["key"]
            assert type(key) is str
            if on_effect is not None:
                on_effect("before-effect")
            _append_line(effects_path, f"{key} {context.call_id}")
            if on_effect is not None:
                on_effect("after-effect")
            return {"done": key}

        def authorization(params: dict[str, object]) -> ToolPermissionIntent:
            return ToolPermissionIntent(action="effect.write", subject=str(params.get("key")), scope="once")

        tool = create_tool(
            name=EFFECT_TOOL,
            description="records its key in an effects log (crash-consistency tests)",
            parameters=dict[str, object],
            execute=execute,
            authorization=authorization,
        )
        return create_bounded_tool(tool, PureBoundary())

    def controller(self) -> _Controller:
        return _Controller(self.effects)


class _Controller:
    """Decides each key as :attr:`World.effects` says; an ``ask`` is resolved ``allow``."""

    def __init__(self, effects: dict[str, Verdict]) -> None:
        self._effects = effects

    def decide(self, intent: ToolPermissionIntent) -> PermissionDecision:
        effect = self._effects.get(intent.subject or "", "deny")
        return PermissionDecision(effect, f"the crash harness says {effect}", f"crash.{effect}")

    async def resolve(self, request: PermissionRequest, signal: AbortSignal) -> PermissionResolution:
        await trio.lowlevel.checkpoint()
        return PermissionResolution("allow", "the crash harness's operator allows it")


class RoundModel:
    """Answers each request with :meth:`World.turn` of its round (its assistant messages so far).

    So a continued turn gets, from a fresh model, the answer the killed process would have
    got. ``requests`` counts every request it was sent.
    """

    def __init__(self, world: World) -> None:
        self._world = world
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        answered = sum(1 for message in request.messages if isinstance(message, AssistantMessage))
        return FakeModel([self._world.turn(answered)]).stream(request)


def _append_line(path: str, line: str) -> None:
    """One ``os.write`` of ``line`` with O_APPEND, then fsync: durable before this returns."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{line}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read_effects(path: str | os.PathLike[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """((key, call id) in effect order, violations): every line must be whole."""
    if not os.path.exists(path):
        return [], []
    with open(path, "rb") as file:
        lines = file.read().decode().split("\n")
    problems = [] if lines[-1] == "" else [f"effects log ends with a torn line {lines[-1]!r}"]
    effects: list[tuple[str, str]] = []
    for line in lines[:-1]:
        key, _, call_id = line.partition(" ")
        effects.append((key, call_id))
    return effects, problems


class _KillingEventStore:
    """The session's log, with self-kill points on both sides of every durable append."""

    def __init__(self, log: SessionEventLog, kill: SelfKill) -> None:
        self._log = log
        self._kill = kill

    def _passing(self, side: str, events: Sequence[Event]) -> None:
        for event in events:
            self._kill.passing(f"{side} {event.type}")
            self._kill.passing(f"{side} any")

    async def append(self, event: Event) -> None:
        self._passing("before-append", [event])
        await self._log.append(event)
        self._passing("after-append", [event])

    def read_session(self, session_id: str) -> AsyncIterator[Event]:
        return self._log.read_session(session_id)


class _KillingBatchEventStore(_KillingEventStore):
    """As :class:`_KillingEventStore`, with ``append_many``: one commit for a boundary's events."""

    async def append_many(self, events: Sequence[Event]) -> None:
        self._passing("before-append", events)
        await self._log.append_many(events)
        self._passing("after-append", events)


async def _continuation_main(params: dict[str, Any], report: Report) -> None:
    kill = SelfKill(params.get("self_kill"), report)
    world = World(params["rounds"], params["calls"])
    acknowledgements = os.open(params["acks"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    async with SqliteSessionStore(params["db"]) as store:
        await store.create(SESSION, owner_id=FIRST_OWNER, lease_ms=FIRST_LEASE_MS)
        log = store.event_log(SESSION, owner_id=FIRST_OWNER)
        port = _KillingBatchEventStore(log, kill) if params["batched"] else _KillingEventStore(log, kill)
        run = RunInput(
            run_id=RUN_ID,
            session_id=SESSION,
            turn_id="turn-continue",
            input="record every key",
            model=MODEL,
            model_adapter=RoundModel(world),
            event_store=port,
            tools=ToolRegistry([world.tool(params["effects"], kill.passing)]),
            permission=world.controller(),
            budget=world.budget(),
            checkpoints=True,
        )
        async with MinimalAgentRuntime().run(run) as stream:
            async for event in stream:
                os.write(acknowledgements, f"{event.event_id}\n".encode())
                os.fsync(acknowledgements)
    os.close(acknowledgements)


def _continuation(params: dict[str, Any], report: Report) -> None:
    trio.run(_continuation_main, params, report)


WORKLOADS: Final = {"continuation": _continuation}
