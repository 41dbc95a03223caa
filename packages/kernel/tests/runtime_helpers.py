"""Shared builders for the runtime tests: deterministic ids and clock, a recording store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness_kernel.events import Event
from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall
from harness_kernel.policy import PermissionDecision
from harness_kernel.runtime import RunInput, RunStream
from harness_kernel.store import MemoryEventStore
from harness_tools import (
    PureBoundary,
    Tool,
    ToolPermissionIntent,
    ToolRegistry,
    create_bounded_tool,
    create_tool,
)


class Ids:
    """``new_id`` and ``now`` that record every call, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._counts: dict[str, int] = {}

    def new_id(self, prefix: str) -> str:
        self._counts[prefix] = self._counts.get(prefix, 0) + 1
        self.calls.append(prefix)
        return f"{prefix}-{self._counts[prefix]}"

    def now(self) -> str:
        self.calls.append("now")
        return "2024-01-01T00:00:00.000Z"


class AskController:
    """A controller that answers every intent with ``effect``; ``resolve`` is optional."""

    def __init__(self, resolve: Callable[..., object] | None = None, effect: str = "ask") -> None:
        self.effect = effect
        self.resolve = resolve
        self.intents: list[ToolPermissionIntent] = []

    def decide(self, intent: ToolPermissionIntent) -> PermissionDecision:
        self.intents.append(intent)
        return PermissionDecision(self.effect, "needs an operator", "rule-ask")  # pyright: ignore[reportArgumentType]


def pure_tool(
    name: str,
    execute: Callable[..., Any],
    authorization: Callable[[dict[str, object]], ToolPermissionIntent] | None = None,
) -> Tool[dict[str, object]]:
    """A bounded pure tool over ``execute`` taking any JSON object."""
    tool = create_tool(
        name=name,
        description=f"test tool {name}",
        parameters=dict[str, object],
        execute=execute,
        authorization=authorization,
    )
    return create_bounded_tool(tool, PureBoundary())


def make_input(model: object, store: object | None = None, **overrides: Any) -> RunInput:
    ids = overrides.pop("ids", None) or Ids()
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "session_id": "sess-1",
        "turn_id": "turn-1",
        "input": "hello",
        "model": "fake-model/v1",
        "model_adapter": model,
        "event_store": store if store is not None else MemoryEventStore(),
        "now": ids.now,
        "new_id": ids.new_id,
    }
    fields.update(overrides)
    return RunInput(**fields)


def tool_turn(*calls: tuple[str, str, Any]) -> ScriptedTurn:
    return ScriptedTurn(tool_calls=[ToolCall(id=i, name=n, arguments=a) for i, n, a in calls])


def registry(*tools: Any) -> ToolRegistry:
    return ToolRegistry(tools)


async def drain(stream: RunStream) -> tuple[list[Event], BaseException | None]:
    events: list[Event] = []
    error: BaseException | None = None
    async with stream:
        try:
            async for event in stream:
                events.append(event)
        except Exception as raised:
            error = raised
    return events, error


def d(event: Event) -> Any:
    """The payload of ``event``, untyped for terse assertions."""
    return event.data


def types(events: list[Event] | tuple[Event, ...]) -> list[str]:
    return [e.type for e in events]


__all__ = [
    "AskController",
    "FakeModel",
    "Ids",
    "d",
    "drain",
    "make_input",
    "pure_tool",
    "registry",
    "tool_turn",
    "types",
]
