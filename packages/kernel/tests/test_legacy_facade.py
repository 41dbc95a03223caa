"""``run_agent`` runs on ``MinimalAgentRuntime``: what its facade keeps of §9 that the runtime
words or decides otherwise (M7's unreviewed tools, repeated model call ids, a returned
permission answer, the caller's ids)."""

from __future__ import annotations

from typing import Any

import pytest
from legacy_helpers import (
    Clock,
    Params,
    call,
    capture,
    error_of,
    of_type,
    options,
    pure_tool,
    tool_turn,
    types,
    with_changes,
)

from harness_kernel.events import Event
from harness_kernel.legacy import Budget, BudgetExceededError, RunResult, run_agent
from harness_kernel.models import FakeModel, ScriptedTurn
from harness_kernel.policy import (
    PermissionDecision,
    PermissionRequest,
    PermissionResolution,
    RulePermissionController,
    ToolPermissionIntent,
)
from harness_kernel.runtime import InvalidRunInputError
from harness_tools import ToolExecutionContext
from harness_workspace import AbortSignal


async def shout_hi(**extra: Any) -> RunResult:
    """One call of a ``shout`` tool, then a final answer."""
    return await run_agent(
        options([tool_turn(call("shout", {"text": "hi"})), ScriptedTurn(content="ok")], **extra)
    )


async def test_an_unreviewed_tool_runs_like_a_pure_one_unpoliced_without_a_controller() -> None:
    result = await shout_hi(
        tools=[pure_tool(bounded=False)],
    )
    assert "policy.decision" not in types(result.events)
    assert of_type(result.events, "tool.result")[0]["output"] == {"text": "HI"}


async def test_an_unreviewed_tool_is_decided_by_the_controller_when_there_is_one() -> None:
    result = await shout_hi(
        tools=[pure_tool(bounded=False)],
        permission=RulePermissionController({"tool.call": "deny"}),
    )
    decision = of_type(result.events, "policy.decision")[0]
    assert (decision["action"], decision["effect"]) == ("tool.call", "deny")
    assert error_of(result.events)["code"] == "TOOL_POLICY_DENIED"


async def test_without_a_controller_a_pure_tools_authorization_is_not_asked() -> None:
    asked: list[Params] = []

    def authorization(params: Params) -> ToolPermissionIntent:
        asked.append(params)
        raise RuntimeError("never called")

    result = await shout_hi(
        tools=[pure_tool(authorization=authorization)],
    )
    assert asked == []
    assert of_type(result.events, "error") == []
    assert of_type(result.events, "tool.result")[0]["ok"] is True


async def test_a_model_may_repeat_its_call_ids_and_sees_its_own_ids_again() -> None:
    model = FakeModel(
        [
            tool_turn(call("shout", {"text": "a"}, "same")),
            tool_turn(call("shout", {"text": "b"}, "same")),
            ScriptedTurn(content="done"),
        ]
    )
    result = await run_agent(options(model=model, tools=[pure_tool()]))
    assert result.status == "completed"
    assert [r["output"] for r in of_type(result.events, "tool.result")] == [{"text": "A"}, {"text": "B"}]
    last = model.requests[2].messages
    assert [getattr(message, "tool_call_id", None) for message in last[2::2]] == ["same", "same"]
    assert [len(getattr(message, "tool_calls", None) or ()) for message in last[1::2]] == [1, 1]
    assert all(message.tool_calls[0].id == "same" for message in last[1::2])  # type: ignore[union-attr]


async def test_a_resolver_may_return_its_answer_without_awaiting() -> None:
    class Returns:
        def decide(self, intent: ToolPermissionIntent) -> PermissionDecision:
            return PermissionDecision("ask", "check")

        def resolve(self, request: PermissionRequest, signal: AbortSignal) -> PermissionResolution:
            assert (request.run_id, request.turn_id) == (None, None)
            return PermissionResolution("allow")

    result = await shout_hi(
        tools=[pure_tool()],
        permission=Returns(),
    )
    assert of_type(result.events, "permission.resolved")[0]["decision"] == "allow"
    assert of_type(result.events, "tool.result")[0]["output"] == {"text": "HI"}


async def test_a_tools_failure_keeps_its_own_text_and_the_callers_ids_end_with_the_run() -> None:
    async def boom(params: Params, context: ToolExecutionContext | None = None) -> object:
        raise ValueError("tool shout failed: said so itself")

    clock = Clock()
    turns = [tool_turn(call("shout", {"text": "a"}, "c1"), call("shout", {"text": "b"}, "c2"))]
    events, outcome = await capture(
        options(turns, clock=clock, tools=[pure_tool(execute=boom)], budget=Budget(max_tool_calls=1))
    )
    assert isinstance(outcome, BudgetExceededError)
    assert error_of(events) == {
        "code": "TOOL_EXECUTION_FAILED",
        "message": "tool shout failed: said so itself",
    }
    # Every id the caller's new_id gave was published; the runtime drew none after the stop.
    assert clock.calls.count("call") == 1
    assert clock.calls[-1] == "evt"
    assert events[-1].event_id == f"evt-{len(clock.calls)}"


async def test_options_the_runtime_refuses_raise_its_typed_error_before_any_event() -> None:
    seen: list[str] = []

    async def record(event: Event) -> None:
        seen.append(event.type)

    with pytest.raises(InvalidRunInputError, match="input must be a str"):
        await run_agent(with_changes(options(), goal="", on_event=record))
    assert seen == []
