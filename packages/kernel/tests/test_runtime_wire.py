"""The runtime's events, byte for byte (spec §2.3, §8.5 to §8.9).

Each scenario reaches optional payload fields both present and absent: ``taskId`` with and
without a task, ``subject`` and ``note`` of an ask, ``ruleId`` of a decision, ``output`` and
``error`` of a result, ``outputMessageId`` and ``note`` of the terminal pair, steering. The
expected text was recorded from the runtime when its producers still wrote camelCase dicts,
so building the payload Structs instead keeps the wire exactly as it was.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

import pytest
import trio
from runtime_helpers import Ids, drain, make_input, pure_tool, registry, tool_turn

from harness_kernel.events import serialize_event
from harness_kernel.models import FakeModel, ScriptedTurn, Usage
from harness_kernel.policy import PermissionDecision, PermissionRequest, PermissionResolution
from harness_kernel.runtime import MinimalAgentRuntime, RuntimeBudget
from harness_kernel.store import MemoryEventStore
from harness_tools import ToolExecutionContext, ToolPermissionIntent
from harness_workspace import AbortSignal

USAGE: Final = Usage(prompt_tokens=3, completion_tokens=2, total_tokens=5)


class Controller:
    """Allows ``echo``, ``broken`` and ``nothing`` (with a rule id), denies ``deny`` (without
    one), asks for the rest."""

    def __init__(self, resolve: object) -> None:
        self.resolve = resolve

    def decide(self, intent: ToolPermissionIntent) -> PermissionDecision:
        if intent.subject in ("echo", "broken", "nothing"):
            return PermissionDecision("allow", "reviewed", "rule-allow")
        if intent.subject == "deny":
            return PermissionDecision("deny", "never", None)
        return PermissionDecision("ask", "needs an operator", "rule-ask")


async def echo(params: dict[str, object], context: ToolExecutionContext | None = None) -> object:
    return {"echo": params}


async def nothing(params: dict[str, object], context: ToolExecutionContext | None = None) -> object:
    return None


async def broken(params: dict[str, object], context: ToolExecutionContext | None = None) -> object:
    raise RuntimeError("it broke")


def subject_intent(params: dict[str, object]) -> ToolPermissionIntent:
    return ToolPermissionIntent(action="docs.read", subject="docs/a.md", scope="run")


def bare_intent(params: dict[str, object]) -> ToolPermissionIntent:
    return ToolPermissionIntent(action="docs.write", subject=None, scope=None)


def tools() -> object:
    return registry(
        pure_tool("echo", echo),
        pure_tool("broken", broken),
        pure_tool("nothing", nothing),
        pure_tool("deny", echo),
        pure_tool("read", echo, subject_intent),
        pure_tool("write", echo, bare_intent),
    )


async def answer(request: PermissionRequest, signal: AbortSignal) -> object:
    if request.action == "docs.read":
        return PermissionResolution("allow", note="read is fine")
    return "deny"


async def full_run() -> list[str]:
    """With a task: every tool outcome, both kinds of ask, steering, warnings, an exceed."""
    store = MemoryEventStore()
    model = FakeModel(
        [
            ScriptedTurn(
                tool_calls=tool_turn(
                    ("m1", "echo", {"x": 1}),
                    ("m2", "broken", {}),
                    ("m3", "deny", {}),
                    ("m4", "read", {"path": "a"}),
                    ("m5", "write", {}),
                    ("m6", "missing", {}),
                    ("m7", "echo", []),
                    ("m8", "nothing", {}),
                    ("m9", "echo", None),
                ).tool_calls,
                usage=USAGE,
            ),
        ]
    )
    runtime = MinimalAgentRuntime()
    stream = runtime.run(
        make_input(
            model,
            store,
            task_id="task-1",
            tools=tools(),
            permission=Controller(answer),
            budget=RuntimeBudget(max_steps=1, max_model_tokens=9, max_tool_calls=9),
        )
    )
    await runtime.steer("run-1", "also this")
    events, error = await drain(stream)
    assert error is not None
    assert list(store.events) == events
    return [serialize_event(event).decode() for event in events]


async def plain_run() -> list[str]:
    """Without a task: a text turn that completes (``outputMessageId``, no note)."""
    store = MemoryEventStore()
    model = FakeModel([ScriptedTurn(text_deltas=["Hel", "lo"], usage=USAGE)])
    events, error = await drain(MinimalAgentRuntime().run(make_input(model, store, ids=Ids())))
    assert error is None
    return [serialize_event(event).decode() for event in events]


async def canceled_run() -> list[str]:
    """Without a task: cancellation while the operator is asked (kernel deny, canceled pair)."""
    store = MemoryEventStore()
    asked = trio.Event()

    async def wait(request: PermissionRequest, signal: AbortSignal) -> object:
        asked.set()
        await trio.sleep_forever()

    model = FakeModel([tool_turn(("m1", "read", {}))])
    runtime = MinimalAgentRuntime()
    stream = runtime.run(make_input(model, store, tools=tools(), permission=Controller(wait)))
    events: list[str] = []
    async with trio.open_nursery() as nursery:

        async def consume() -> None:
            async for event in stream:
                events.append(serialize_event(event).decode())

        nursery.start_soon(consume)
        await asked.wait()
        await runtime.cancel("run-1")
    assert events == [serialize_event(event).decode() for event in store.events]
    return events


EXPECTED: Final = Path(__file__).parent / "runtime_wire"
"""One file per scenario: the serialized events, one per line, in append order."""


@pytest.mark.parametrize("scenario", [full_run, plain_run, canceled_run], ids=["full", "plain", "canceled"])
async def test_the_runtime_writes_each_event_byte_for_byte_as_recorded(
    scenario: Callable[[], Awaitable[list[str]]],
) -> None:
    name = scenario.__name__.removesuffix("_run")
    expected = (EXPECTED / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    assert await scenario() == expected
