"""The legacy ``run_agent`` loop (kernel.md §9): events, per-call branches, budgets, failures."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec
import pytest
import trio

from harness_kernel.events import Event, serialize_event
from harness_kernel.legacy import (
    Budget,
    BudgetExceededError,
    InvalidModelResponseError,
    InvalidToolResultError,
    RunCanceledError,
    RunOptions,
    RunResult,
    normalize_tool_json,
    run_agent,
)
from harness_kernel.models import (
    CompletionRequest,
    CompletionResponse,
    FakeModel,
    ScriptedTurn,
    ToolCall,
    Usage,
)
from harness_kernel.policy import (
    PermissionDecision,
    PermissionRequest,
    PermissionResolution,
    RulePermissionController,
    ToolPermissionIntent,
)
from harness_tools import (
    PureBoundary,
    Tool,
    ToolExecutionContext,
    ToolRegistry,
    WorkspaceBoundary,
    create_bounded_tool,
    create_echo_tool,
    create_read_file_tool,
    create_tool,
)
from harness_workspace import (
    AbortController,
    AbortSignal,
    MemoryWorkspace,
    WorkspaceOperationUnsupportedError,
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

    opts = _with(opts, on_event=record)
    try:
        return seen, await run_agent(opts)
    except Exception as error:
        return seen, error


def _with(opts: RunOptions, **changes: Any) -> RunOptions:
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
    result = await run_agent(_with(options(clock=clock), session_id=None))
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


def error_of(events: Sequence[Event]) -> dict[str, object]:
    results = of_type(events, "tool.result")
    assert results[0]["ok"] is False
    error = results[0]["error"]
    assert isinstance(error, dict)
    return error  # type: ignore[return-value]


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


def asking_tool() -> Tool[Params]:
    return pure_tool(
        authorization=lambda params: ToolPermissionIntent(
            action="net.fetch", subject=params.text, scope="run"
        )
    )


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


# ------------------------------------------------------------------ budgets and steps


async def test_token_budget_stops_before_the_next_request_with_a_warning() -> None:
    usage = Usage(prompt_tokens=60, completion_tokens=40, total_tokens=100)
    turns = [ScriptedTurn(content="", tool_calls=[call("echo")], usage=usage), ScriptedTurn(content="never")]
    events, outcome = await capture(
        options(turns, tools=[create_echo_tool()], budget=Budget(max_model_tokens=100))
    )
    assert isinstance(outcome, BudgetExceededError)
    assert str(outcome) == "budget exceeded: max_model_tokens used=100 limit=100"
    assert types(events)[-2:] == ["budget.warning", "agent.stopped"]
    warnings = of_type(events, "budget.warning")
    assert warnings[0] == {"metric": "tokens", "used": 100, "limit": 100, "pct": 100}
    assert of_type(events, "agent.stopped")[0]["note"] == "max_model_tokens=100"
    assert of_type(events, "agent.stopped")[0]["status"] == "budget_exceeded"
    assert "tool.call" not in types(events)


async def test_token_warning_fires_once_at_half_and_carries_only_task_id() -> None:
    usage = Usage(prompt_tokens=30, completion_tokens=30, total_tokens=60)
    turns = [
        ScriptedTurn(content="", tool_calls=[call("echo")], usage=usage),
        ScriptedTurn(content="ok", usage=Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2)),
    ]
    result = await run_agent(
        options(turns, tools=[create_echo_tool()], budget=Budget(max_model_tokens=100), task_id="t-1")
    )
    assert of_type(result.events, "budget.warning") == [
        {"taskId": "t-1", "metric": "tokens", "used": 60, "limit": 100, "pct": 60}
    ]


async def test_tool_call_budget_warns_one_call_early_and_stops_before_the_call() -> None:
    turns = [tool_turn(call("echo", call_id="c1"), call("echo", call_id="c2"), call("echo", call_id="c3"))]
    events, outcome = await capture(
        options(turns, tools=[create_echo_tool()], budget=Budget(max_tool_calls=2))
    )
    assert isinstance(outcome, BudgetExceededError)
    assert (outcome.metric, outcome.used, outcome.limit) == ("max_tool_calls", 2, 2)
    assert types(events)[4:] == [
        "tool.call",
        "tool.result",
        "budget.warning",
        "tool.call",
        "tool.result",
        "budget.warning",
        "agent.stopped",
    ]
    assert [w["used"] for w in of_type(events, "budget.warning")] == [1, 2]
    assert of_type(events, "agent.stopped")[0]["note"] == "max_tool_calls=2"


async def test_exhausted_steps_fail_without_raising() -> None:
    result = await run_agent(
        _with(options([tool_turn(call("echo"))], tools=[create_echo_tool()]), max_steps=1)
    )
    assert result.status == "failed"
    stopped = of_type(result.events, "agent.stopped")[0]
    assert stopped == {
        "agentId": stopped["agentId"],
        "status": "failed",
        "steps": 1,
        "toolCalls": 1,
        "note": "max_steps=1 reached without a final answer",
    }


# ------------------------------------------------------------------ model failures


class ScriptedModel:
    name = "scripted/v1"

    def __init__(self, answer: Callable[[CompletionRequest], object]) -> None:
        self.answer = answer

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        return self.answer(request)  # type: ignore[return-value]


class ProviderError(Exception):
    code = "PROVIDER_RATE_LIMITED"

    def __init__(self) -> None:
        super().__init__("provider says: api key sk-secret")
        self.retryable = True


class PropertyError(Exception):
    @property
    def code(self) -> str:
        raise AssertionError("a property must never be called")


async def test_model_exception_trail_uses_static_code_and_retryable_and_reraises() -> None:
    error = ProviderError()

    def fail(request: CompletionRequest) -> object:
        raise error

    events, outcome = await capture(options(model=ScriptedModel(fail)))
    assert outcome is error
    assert types(events)[2:] == ["model.request", "model.response", "error", "agent.stopped"]
    response = of_type(events, "model.response")[0]
    assert response["finishReason"] == "error"
    assert response["usage"] == {"promptTokens": 0, "completionTokens": 0, "totalTokens": 0}
    assert of_type(events, "error")[0] == {
        "code": "PROVIDER_RATE_LIMITED",
        "message": "model completion failed for scripted/v1",
        "retryable": True,
    }
    assert of_type(events, "agent.stopped")[0]["status"] == "failed"


async def test_model_exception_with_a_property_code_falls_back_without_calling_it() -> None:
    def fail(request: CompletionRequest) -> object:
        raise PropertyError("x")

    events, outcome = await capture(options(model=ScriptedModel(fail)))
    assert isinstance(outcome, PropertyError)
    assert of_type(events, "error")[0] == {
        "code": "MODEL_COMPLETION_FAILED",
        "message": "model completion failed for scripted/v1",
        "retryable": False,
    }


def response(**changes: Any) -> CompletionResponse:
    fields: dict[str, Any] = {
        "id": "r1",
        "content": "hi",
        "tool_calls": (),
        "usage": Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2),
        "finish_reason": "stop",
    }
    fields.update(changes)
    return CompletionResponse(**fields)


@pytest.mark.parametrize(
    "bad",
    [
        response(id=""),
        response(usage=Usage(prompt_tokens=1, completion_tokens=1, total_tokens=5)),
        response(finish_reason="weird"),
        "not a response",
    ],
)
async def test_malformed_response_is_invalid_before_model_response(bad: object) -> None:
    events, outcome = await capture(options(model=ScriptedModel(lambda request: bad)))
    assert isinstance(outcome, InvalidModelResponseError)
    assert of_type(events, "model.response")[0]["finishReason"] == "error"
    assert of_type(events, "error")[0]["code"] == "MODEL_INVALID_RESPONSE"
    assert types(events)[-1] == "agent.stopped"


@pytest.mark.parametrize(
    "bad",
    [
        response(finish_reason="error"),
        response(finish_reason="tool_calls"),
        response(finish_reason="tool_calls", tool_calls=(ToolCall("c1", "echo", {1, 2}),)),  # type: ignore[arg-type]
    ],
)
async def test_inconsistent_response_is_invalid_after_model_response(bad: CompletionResponse) -> None:
    events, outcome = await capture(options(model=ScriptedModel(lambda request: bad)))
    assert isinstance(outcome, InvalidModelResponseError)
    assert of_type(events, "model.response")[0]["finishReason"] == bad.finish_reason
    assert of_type(events, "error")[0]["code"] == "MODEL_INVALID_RESPONSE"


async def test_length_finish_is_truncated_and_returns_failed_with_the_partial_text() -> None:
    result = await run_agent(options([ScriptedTurn(content="partial", finish_reason="length")]))
    assert result.status == "failed"
    assert result.text == "partial"
    assert of_type(result.events, "error")[0]["code"] == "MODEL_OUTPUT_TRUNCATED"
    assert types(result.events)[-2:] == ["error", "agent.stopped"]


# ------------------------------------------------------------------ signals and on_event


async def test_aborted_signal_before_the_first_request_cancels_without_an_error_event() -> None:
    controller = AbortController()
    controller.abort("stop")
    events, outcome = await capture(options([ScriptedTurn(content="x")], signal=controller.signal))
    assert isinstance(outcome, RunCanceledError)
    assert str(outcome) == "agent run canceled"
    assert types(events) == ["session.created", "agent.started", "agent.stopped"]
    assert of_type(events, "agent.stopped")[0]["note"] == "abort signal received"
    assert of_type(events, "agent.stopped")[0]["status"] == "canceled"


async def test_abort_during_the_model_call_emits_run_canceled() -> None:
    controller = AbortController()

    class Hanging:
        name = "hang/v1"

        async def complete(self, request: CompletionRequest) -> CompletionResponse:
            controller.abort("stop")
            await trio.sleep_forever()
            raise AssertionError("unreachable")

    events, outcome = await capture(options(model=Hanging(), signal=controller.signal))
    assert isinstance(outcome, RunCanceledError)
    assert types(events)[-2:] == ["error", "agent.stopped"]
    assert of_type(events, "error")[0]["code"] == "RUN_CANCELED"


async def test_abort_during_tool_execution_records_tool_canceled() -> None:
    controller = AbortController()

    async def hang(params: Params, context: ToolExecutionContext | None = None) -> object:
        controller.abort("stop")
        await trio.sleep_forever()

    events, outcome = await capture(
        options(
            [tool_turn(call("shout", {"text": "a"}))],
            tools=[pure_tool(execute=hang)],
            signal=controller.signal,
        )
    )
    assert isinstance(outcome, RunCanceledError)
    assert types(events)[-3:] == ["tool.call", "tool.result", "agent.stopped"]
    assert error_of(events) == {"code": "TOOL_CANCELED", "message": "tool canceled"}
    assert of_type(events, "agent.stopped")[0]["note"] == "abort signal received during tool execution"


async def test_abort_while_awaiting_permission_denies_and_cancels() -> None:
    controller = AbortController()

    async def resolve(request: PermissionRequest, signal: AbortSignal) -> PermissionResolution:
        controller.abort("stop")
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    events, outcome = await capture(
        options(
            [tool_turn(call("shout", {"text": "a"}))],
            tools=[asking_tool()],
            permission=RulePermissionController({"net.fetch": "ask"}, resolve=resolve),
            signal=controller.signal,
        )
    )
    assert isinstance(outcome, RunCanceledError)
    resolved = of_type(events, "permission.resolved")[0]
    assert resolved["decision"] == "deny"
    assert resolved["note"] == "run canceled while awaiting permission"
    assert of_type(events, "agent.stopped")[0]["note"] == "abort signal received while awaiting permission"


async def test_on_event_failure_propagates_unchanged_and_stops_the_run() -> None:
    failure = OSError("disk full")
    seen: list[str] = []

    async def on_event(event: Event) -> None:
        seen.append(event.type)
        if event.type == "model.request":
            raise failure

    model = FakeModel([ScriptedTurn(content="x")])
    with pytest.raises(OSError, match="disk full") as caught:
        await run_agent(_with(options(model=model), on_event=on_event))
    assert caught.value is failure
    assert seen == ["session.created", "agent.started", "model.request"]
    assert model.requests == ()
