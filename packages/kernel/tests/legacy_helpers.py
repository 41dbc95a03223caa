"""Shared builders for the legacy ``run_agent`` tests: a deterministic clock, runs, decoders."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from harness_kernel.events import Event, serialize_event
from harness_kernel.legacy import (
    RunOptions,
    RunResult,
    run_agent,
)
from harness_kernel.models import (
    FakeModel,
    ScriptedTurn,
    ToolCall,
)
from harness_kernel.policy import (
    ToolPermissionIntent,
)
from harness_tools import (
    PureBoundary,
    Tool,
    ToolExecutionContext,
    ToolRegistry,
    create_bounded_tool,
    create_tool,
)


class Clock:
    """Deterministic ``now`` and ``new_id`` that also log the order of calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.ticks = 0

    def now(self) -> str:
        self.ticks += 1
        self.calls.append("now")
        return f"2026-01-01T00:00:00.{self.ticks:03d}Z"

    def new_id(self, prefix: str) -> str:
        self.calls.append(prefix)
        return f"{prefix}-{len(self.calls)}"


def call(name: str, arguments: object = None, call_id: str = "c1") -> ToolCall:
    return ToolCall(call_id, name, {} if arguments is None else arguments)  # type: ignore[arg-type]


def tool_turn(*calls: ToolCall) -> ScriptedTurn:
    return ScriptedTurn(content="", tool_calls=calls)


def options(
    turns: Sequence[ScriptedTurn] = (),
    *,
    model: Any = None,
    tools: Sequence[Tool[Any]] = (),
    clock: Clock | None = None,
    **extra: Any,
) -> RunOptions:
    clock = clock or Clock()
    return RunOptions(
        goal="do the thing",
        model=model if model is not None else FakeModel(turns),
        tools=ToolRegistry(tools) if tools else None,
        session_id="sess-1",
        now=clock.now,
        new_id=clock.new_id,
        **extra,
    )


def types(events: Sequence[Event]) -> list[str]:
    return [event.type for event in events]


def wire(event: Event) -> dict[str, object]:
    document: dict[str, dict[str, object]] = msgspec.json.decode(serialize_event(event))
    return document["data"]


def of_type(events: Sequence[Event], event_type: str) -> list[dict[str, object]]:
    return [wire(event) for event in events if event.type == event_type]


async def capture(opts: RunOptions) -> tuple[list[Event], BaseException | RunResult]:
    """Run with an ``on_event`` that records every event; return events and the outcome."""
    seen: list[Event] = []

    async def record(event: Event) -> None:
        seen.append(event)

    opts = with_changes(opts, on_event=record)
    try:
        return seen, await run_agent(opts)
    except Exception as error:
        return seen, error


def with_changes(opts: RunOptions, **changes: Any) -> RunOptions:
    fields = {name: getattr(opts, name) for name in RunOptions.__dataclass_fields__}
    fields.update(changes)
    return RunOptions(**fields)


class Params(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    text: str


def pure_tool(
    name: str = "shout",
    execute: Callable[..., Any] | None = None,
    authorization: Callable[[Any], Any] | None = None,
    *,
    bounded: bool = True,
) -> Tool[Params]:
    async def shout(params: Params, context: ToolExecutionContext | None = None) -> object:
        return {"text": params.text.upper()}

    tool = create_tool(
        name=name,
        description="shout",
        parameters=Params,
        execute=execute or shout,
        authorization=authorization,
    )
    return create_bounded_tool(tool, PureBoundary()) if bounded else tool


def error_of(events: Sequence[Event]) -> dict[str, object]:
    results = of_type(events, "tool.result")
    assert results[0]["ok"] is False
    error = results[0]["error"]
    assert isinstance(error, dict)
    return error  # type: ignore[return-value]


def asking_tool() -> Tool[Params]:
    return pure_tool(
        authorization=lambda params: ToolPermissionIntent(
            action="net.fetch", subject=params.text, scope="run"
        )
    )
