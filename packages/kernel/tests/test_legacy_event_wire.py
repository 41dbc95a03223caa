"""The exact bytes of the legacy loop's events, optional fields present and absent (kernel.md §9).

The other legacy tests compare decoded payloads; these pin the wire text itself, key order
included, for the fields a producer may leave out: ``workspace``, ``taskId``, ``subject``,
``ruleId``, ``note`` and a JSON ``null`` output (present, never dropped).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import trio
from legacy_helpers import Clock, Params, call, options, pure_tool, tool_turn

from harness_kernel.events import serialize_event
from harness_kernel.legacy import Budget, run_agent
from harness_kernel.models import ScriptedTurn
from harness_kernel.policy import (
    PermissionDecision,
    PermissionRequest,
    PermissionResolution,
    RulePermissionController,
)
from harness_tools import ToolExecutionContext, ToolPermissionIntent
from harness_workspace import AbortSignal

# Recorded from the loop before its producers built payload Structs (issue #16): the bytes
# must not move. One event per line, as serialize_event writes it.
_RECORDED: Final = Path(__file__).parent / "legacy_event_wire"


def recorded(name: str) -> list[str]:
    return (_RECORDED / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()


class AskOnce:
    """Asks about every intent with a rule id; the operator allows it for the run."""

    def decide(self, intent: ToolPermissionIntent) -> PermissionDecision:
        return PermissionDecision("ask", "check first", "rule-9")

    async def resolve(self, request: PermissionRequest, signal: AbortSignal) -> PermissionResolution:
        return PermissionResolution("allow", "fine")


def subjectless(params: Params) -> ToolPermissionIntent:
    return ToolPermissionIntent(action="net.fetch", scope="run")


async def nothing(params: Params, context: ToolExecutionContext | None = None) -> None:
    return None


async def wire_text_of_a_run_with_every_optional_field() -> list[str]:
    turns = [
        tool_turn(call("fetch", {"text": "a"}, "c1"), call("fetch", {"text": "b"}, "c2")),
        ScriptedTurn(content="done"),
    ]
    result = await run_agent(
        options(
            turns,
            clock=Clock(),
            tools=[pure_tool("fetch", execute=nothing, authorization=subjectless)],
            permission=AskOnce(),
            budget=Budget(max_tool_calls=2),
            task_id="task-1",
            workspace="ws-1",
        )
    )
    assert result.status == "completed"
    return [serialize_event(event).decode() for event in result.events]


async def wire_text_of_a_run_with_optional_fields_left_out() -> list[str]:
    turns = [
        tool_turn(call("fetch", {"text": "a"}, "c1"), call("missing", {}, "c2")),
        ScriptedTurn(content="partial", finish_reason="length"),
    ]
    result = await run_agent(
        options(
            turns,
            clock=Clock(),
            tools=[
                pure_tool(
                    "fetch",
                    authorization=lambda params: ToolPermissionIntent(
                        action="net.fetch", subject=params.text
                    ),
                )
            ],
            permission=RulePermissionController({"net.fetch": "ask"}),
        )
    )
    assert result.status == "failed"
    return [serialize_event(event).decode() for event in result.events]


async def test_every_optional_field_a_run_can_fill_is_on_the_wire_in_schema_order(
    mock_clock: trio.testing.MockClock,
) -> None:
    assert await wire_text_of_a_run_with_every_optional_field() == recorded("every_optional_field")


async def test_optional_fields_a_run_leaves_empty_are_absent_from_the_wire(
    mock_clock: trio.testing.MockClock,
) -> None:
    assert await wire_text_of_a_run_with_optional_fields_left_out() == recorded("optional_fields_left_out")
