"""Shared builders for the runtime tests: deterministic ids and clock, a recording store."""

from __future__ import annotations

from typing import Any

from harness_kernel.events import Event
from harness_kernel.models import FakeModel, ScriptedTurn, ToolCall
from harness_kernel.runtime import RunInput, RunStream
from harness_kernel.store import MemoryEventStore
from harness_tools import ToolRegistry


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


__all__ = ["FakeModel", "Ids", "d", "drain", "make_input", "registry", "tool_turn", "types"]
