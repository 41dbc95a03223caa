"""The legacy ``run_agent`` loop (kernel.md §9): the event trail and every per-call branch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest
from legacy_helpers import (
    Clock,
    Params,
    asking_tool,
    call,
    error_of,
    of_type,
    options,
    pure_tool,
    tool_turn,
    types,
    wire,
    with_changes,
)

from harness_kernel.legacy import (
    InvalidToolResultError,
    normalize_tool_json,
    run_agent,
)
from harness_kernel.models import (
    FakeModel,
    ScriptedTurn,
)
from harness_kernel.policy import (
    PermissionDecision,
    PermissionRequest,
    PermissionResolution,
    RulePermissionController,
    ToolPermissionIntent,
)
from harness_tools import (
    ToolExecutionContext,
    WorkspaceBoundary,
    create_bounded_tool,
    create_echo_tool,
    create_read_file_tool,
    create_tool,
)
from harness_workspace import (
    AbortSignal,
    MemoryWorkspace,
    WorkspaceOperationUnsupportedError,
)

# ------------------------------------------------------------------ text and tool runs


async def test_text_run_emits_the_canonical_events_with_their_data_and_id_order() -> None:
    clock = Clock()
    result = await run_agent(
        options([ScriptedTurn(content="done")], clock=clock, task_id="task-1", workspace="ws-1")
    )
    assert result.status == "completed"
    assert result.text == "done"
    assert result.steps == 1
    assert result.tool_calls == 0
    assert types(result.events) == [
        "session.created",
        "agent.started",
        "model.request",
        "model.response",
        "agent.stopped",
    ]
    created, started, request, response, stopped = (wire(event) for event in result.events)
    assert created == {"sessionId": "sess-1", "workspace": "ws-1"}
    assert started == {
        "agentId": "agent-3",
        "sessionId": "sess-1",
        "taskId": "task-1",
        "model": "fake-model/v1",
    }
    assert request == {"requestId": "req-6", "model": "fake-model/v1", "messageCount": 1}
    assert response["finishReason"] == "stop"
    assert response["usage"] == msgspec.to_builtins(result.usage)
    assert stopped == {"agentId": "agent-3", "status": "completed", "steps": 1, "toolCalls": 0}
    assert all(event.actor == "kernel" for event in result.events)
    # Each event: now() then new_id("evt").
    assert clock.calls[:6] == ["now", "evt", "agent", "now", "evt", "req"]
    assert result.events[0].event_id == "evt-2"
    assert result.events[0].at == "2026-01-01T00:00:00.001Z"


async def test_default_session_id_comes_from_new_id_before_any_event() -> None:
    clock = Clock()
    result = await run_agent(with_changes(options(clock=clock), session_id=None))
    assert clock.calls[0] == "sess"
    assert wire(result.events[0]) == {"sessionId": "sess-1"}


async def test_tool_run_without_controller_runs_pure_tool_with_no_policy_event() -> None:
    echo = create_echo_tool()
    model = FakeModel([tool_turn(call("echo", {"a": 1})), ScriptedTurn(content="ok")])
    result = await run_agent(options(model=model, tools=[echo]))
    assert types(result.events) == [
        "session.created",
        "agent.started",
        "model.request",
        "model.response",
        "tool.call",
        "tool.result",
        "model.request",
        "model.response",
        "agent.stopped",
    ]
    tool_call = of_type(result.events, "tool.call")[0]
    assert tool_call == {"callId": tool_call["callId"], "tool": "echo", "input": {"a": 1}}
    tool_result = of_type(result.events, "tool.result")[0]
    assert tool_result["ok"] is True
    assert tool_result["output"] == {"echo": "ok", "received": {"a": 1}}
    assert tool_result["callId"] == tool_call["callId"]
    assert isinstance(tool_result["durationMs"], int)
    assert result.tool_calls == 1
    # The model saw every registered tool and then the observation.
    second = model.requests[1]
    assert second.tools is not None
    assert [tool.name for tool in second.tools] == ["echo"]
    assert second.messages[-1].content == '{"echo":"ok","received":{"a":1}}'


async def test_model_sees_unbounded_tools_too() -> None:
    model = FakeModel([ScriptedTurn(content="x")])
    await run_agent(options(model=model, tools=[pure_tool(bounded=False)]))
    assert model.requests[0].tools is not None
    assert [tool.name for tool in model.requests[0].tools] == ["shout"]


# ------------------------------------------------------------------ per-call branches


async def test_unknown_tool_is_not_found_without_policy() -> None:
    result = await run_agent(
        options(
            [tool_turn(call("missing")), ScriptedTurn(content="ok")], permission=RulePermissionController({})
        )
    )
    assert error_of(result.events) == {"code": "TOOL_NOT_FOUND", "message": "unknown tool: missing"}
    assert "policy.decision" not in types(result.events)


async def test_bad_arguments_are_bad_input_without_policy() -> None:
    result = await run_agent(
        options(
            [tool_turn(call("shout", {"text": 5})), ScriptedTurn(content="ok")],
            tools=[pure_tool()],
            permission=RulePermissionController({"tool.call": "allow"}),
        )
    )
    error = error_of(result.events)
    assert error["code"] == "TOOL_BAD_INPUT"
    assert str(error["message"]).startswith("invalid input for shout: ")
    assert "policy.decision" not in types(result.events)


async def test_controller_allow_publishes_a_bare_policy_decision_before_execution() -> None:
    result = await run_agent(
        options(
            [tool_turn(call("shout", {"text": "hi"})), ScriptedTurn(content="ok")],
            tools=[pure_tool()],
            permission=RulePermissionController({"tool.call": "allow"}),
        )
    )
    assert types(result.events)[4:7] == ["tool.call", "policy.decision", "tool.result"]
    decision = of_type(result.events, "policy.decision")[0]
    assert decision == {
        "action": "tool.call",
        "subject": "shout",
        "effect": "allow",
        "reason": 'flat rule for "tool.call"',
    }
    assert of_type(result.events, "tool.result")[0]["output"] == {"text": "HI"}


async def test_controller_deny_is_policy_denied_with_its_reason_and_rule_id() -> None:
    class Deny:
        def decide(self, intent: ToolPermissionIntent) -> PermissionDecision:
            return PermissionDecision("deny", "not today", "rule-7")

    result = await run_agent(
        options(
            [tool_turn(call("shout", {"text": "hi"})), ScriptedTurn(content="ok")],
            tools=[pure_tool()],
            permission=Deny(),
        )
    )
    assert of_type(result.events, "policy.decision")[0]["ruleId"] == "rule-7"
    assert error_of(result.events) == {"code": "TOOL_POLICY_DENIED", "message": "not today"}


async def test_ask_with_operator_allow_for_the_run_grants_later_calls() -> None:
    requests: list[PermissionRequest] = []
    signals: list[AbortSignal] = []

    async def resolve(request: PermissionRequest, signal: AbortSignal) -> PermissionResolution:
        requests.append(request)
        signals.append(signal)
        return PermissionResolution("allow", "fine")

    turns = [
        tool_turn(call("shout", {"text": "a"}, "c1"), call("shout", {"text": "a"}, "c2")),
        ScriptedTurn(content="ok"),
    ]
    result = await run_agent(
        options(
            turns,
            tools=[asking_tool()],
            permission=RulePermissionController({"net.fetch": "ask"}, resolve=resolve),
        )
    )
    assert types(result.events)[4:12] == [
        "tool.call",
        "policy.decision",
        "permission.requested",
        "permission.resolved",
        "tool.result",
        "tool.call",
        "policy.decision",
        "tool.result",
    ]
    requested = of_type(result.events, "permission.requested")[0]
    resolved_event = next(event for event in result.events if event.type == "permission.resolved")
    assert resolved_event.actor == "operator"
    assert wire(resolved_event)["note"] == "fine"
    assert requested["scope"] == "run"
    assert requests[0].permission_id == requested["permissionId"]
    assert requests[0].call_id == requested["callId"]
    assert type(signals[0]) is AbortSignal
    assert not signals[0].aborted


async def test_ask_without_resolver_is_denied_by_the_kernel() -> None:
    result = await run_agent(
        options(
            [tool_turn(call("shout", {"text": "a"})), ScriptedTurn(content="ok")],
            tools=[asking_tool()],
            permission=RulePermissionController({"net.fetch": "ask"}),
        )
    )
    resolved = next(event for event in result.events if event.type == "permission.resolved")
    assert resolved.actor == "kernel"
    assert wire(resolved)["note"] == "no permission resolver"
    assert error_of(result.events) == {"code": "TOOL_PERMISSION_DENIED", "message": "no permission resolver"}


async def test_failing_resolver_denies_and_operator_deny_has_a_default_message() -> None:
    async def broken(request: PermissionRequest, signal: AbortSignal) -> PermissionResolution:
        raise RuntimeError("secret provider text")

    result = await run_agent(
        options(
            [tool_turn(call("shout", {"text": "a"})), ScriptedTurn(content="ok")],
            tools=[asking_tool()],
            permission=RulePermissionController({"net.fetch": "ask"}, resolve=broken),
        )
    )
    assert error_of(result.events) == {
        "code": "TOOL_PERMISSION_DENIED",
        "message": "permission resolver failed",
    }

    async def deny(request: PermissionRequest, signal: AbortSignal) -> str:
        return "deny"

    result = await run_agent(
        options(
            [tool_turn(call("shout", {"text": "a"})), ScriptedTurn(content="ok")],
            tools=[asking_tool()],
            permission=RulePermissionController({"net.fetch": "ask"}, resolve=deny),  # type: ignore[arg-type]
        )
    )
    assert error_of(result.events) == {
        "code": "TOOL_PERMISSION_DENIED",
        "message": "operator denied permission",
    }


def raising_intent(params: Params) -> ToolPermissionIntent:
    raise RuntimeError("boom")


def wrong_type_intent(params: Params) -> ToolPermissionIntent:
    return "not an intent"  # type: ignore[return-value]


def empty_action_intent(params: Params) -> ToolPermissionIntent:
    return ToolPermissionIntent(action="")


@pytest.mark.parametrize("authorization", [raising_intent, wrong_type_intent, empty_action_intent])
async def test_failing_intent_emits_an_error_and_fails_closed_without_policy(
    authorization: Callable[[Any], Any],
) -> None:
    result = await run_agent(
        options(
            [tool_turn(call("shout", {"text": "a"})), ScriptedTurn(content="ok")],
            tools=[pure_tool(authorization=authorization)],
            permission=RulePermissionController({"tool.call": "allow"}),
        )
    )
    assert "policy.decision" not in types(result.events)
    assert of_type(result.events, "error") == [
        {
            "code": "TOOL_AUTHORIZATION_FAILED",
            "message": "authorization failed for tool shout",
            "retryable": False,
        }
    ]
    assert error_of(result.events) == {
        "code": "TOOL_AUTHORIZATION_FAILED",
        "message": "tool authorization failed closed",
    }


async def test_awaitable_decision_is_closed_and_fails_closed() -> None:
    class AsyncDecide:
        async def decide(self, intent: ToolPermissionIntent) -> PermissionDecision:
            return PermissionDecision("allow", "yes")

    result = await run_agent(
        options(
            [tool_turn(call("shout", {"text": "a"})), ScriptedTurn(content="ok")],
            tools=[pure_tool()],
            permission=AsyncDecide(),
        )
    )
    assert "policy.decision" not in types(result.events)
    assert error_of(result.events)["code"] == "TOOL_AUTHORIZATION_FAILED"


async def test_workspace_tool_without_capability_is_denied_by_the_m8_rule() -> None:
    result = await run_agent(
        options(
            [tool_turn(call("read_file", {"path": "a.txt"})), ScriptedTurn(content="ok")],
            tools=[create_read_file_tool("/repo")],
            permission=RulePermissionController({"fs.read": "allow"}),
        )
    )
    decision = of_type(result.events, "policy.decision")[0]
    assert decision == {
        "action": "fs.read",
        "subject": "a.txt",
        "effect": "deny",
        "reason": "tool read_file requires an injected workspace capability",
        "ruleId": "kernel.m8.workspace_required",
    }
    assert error_of(result.events)["code"] == "WORKSPACE_OPERATION_REQUIRED"


async def test_workspace_tool_without_controller_is_denied_by_the_m8_rule() -> None:
    workspace = MemoryWorkspace({"a.txt": "hello"})
    result = await run_agent(
        options(
            [tool_turn(call("read_file", {"path": "a.txt"})), ScriptedTurn(content="ok")],
            tools=[create_read_file_tool("/repo")],
            workspace_capability=workspace,
        )
    )
    decision = of_type(result.events, "policy.decision")[0]
    assert decision["ruleId"] == "kernel.m8.permission_required"
    assert decision["reason"] == "workspace effects require an injected permission controller"
    assert error_of(result.events)["code"] == "TOOL_PERMISSION_REQUIRED"
    assert workspace.calls == []


async def test_workspace_tool_gets_a_one_operation_view_and_pure_tools_get_none() -> None:
    contexts: list[ToolExecutionContext | None] = []

    async def plain(params: Params, context: ToolExecutionContext | None = None) -> object:
        contexts.append(context)
        return "ok"

    workspace = MemoryWorkspace({"a.txt": "hello"})
    result = await run_agent(
        options(
            [
                tool_turn(
                    call("read_file", {"path": "a.txt"}, "c1"),
                    call("plain", {"text": "x"}, "c2"),
                ),
                ScriptedTurn(content="ok"),
            ],
            tools=[create_read_file_tool("/repo"), pure_tool("plain", plain)],
            workspace_capability=workspace,
            permission=RulePermissionController({"fs.read": "allow", "tool.call": "allow"}),
            task_id="task-9",
        )
    )
    outputs = of_type(result.events, "tool.result")
    assert outputs[0]["output"] == {"path": "a.txt", "content": "hello", "size": 5}
    assert outputs[1]["output"] == "ok"
    context = contexts[0]
    assert context is not None
    assert context.workspace is None
    assert context.session_id == "sess-1"
    assert context.task_id == "task-9"
    assert context.call_id == of_type(result.events, "tool.call")[1]["callId"]


async def test_restricted_view_rejects_other_operations_with_the_workspace_code() -> None:
    async def lister(params: Params, context: ToolExecutionContext | None = None) -> object:
        assert context is not None
        assert context.workspace is not None
        return await context.workspace.list_files(".")

    tool = create_bounded_tool(
        create_tool(name="lister", description="d", parameters=Params, execute=lister),
        WorkspaceBoundary(capability="read_file", root="/repo"),
    )
    workspace = MemoryWorkspace({"a.txt": "hello"})
    result = await run_agent(
        options(
            [tool_turn(call("lister", {"text": "x"})), ScriptedTurn(content="ok")],
            tools=[tool],
            workspace_capability=workspace,
            permission=RulePermissionController({"tool.call": "allow"}),
        )
    )
    assert error_of(result.events)["code"] == WorkspaceOperationUnsupportedError("list_files").code
    assert workspace.calls == []


async def test_tool_exception_is_execution_failed_with_the_raw_message() -> None:
    async def boom(params: Params, context: ToolExecutionContext | None = None) -> object:
        raise ValueError("raw text")

    result = await run_agent(
        options(
            [tool_turn(call("shout", {"text": "a"})), ScriptedTurn(content="ok")],
            tools=[pure_tool(execute=boom)],
        )
    )
    assert error_of(result.events) == {"code": "TOOL_EXECUTION_FAILED", "message": "raw text"}


async def test_non_json_result_is_invalid_result() -> None:
    async def odd(params: Params, context: ToolExecutionContext | None = None) -> object:
        return {1, 2}

    result = await run_agent(
        options(
            [tool_turn(call("shout", {"text": "a"})), ScriptedTurn(content="ok")],
            tools=[pure_tool(execute=odd)],
        )
    )
    assert error_of(result.events) == {
        "code": "TOOL_INVALID_RESULT",
        "message": "tool result is not a bounded JSON value",
    }


def test_normalize_tool_json_freezes_and_rejects() -> None:
    value, encoded = normalize_tool_json({"a": [1, 2]})
    assert value == {"a": [1, 2]}
    assert encoded == b'{"a":[1,2]}'
    with pytest.raises(InvalidToolResultError):
        normalize_tool_json(float("nan"))
    nested: list[object] = []
    for _ in range(70):
        nested = [nested]
    with pytest.raises(InvalidToolResultError):
        normalize_tool_json(nested)
