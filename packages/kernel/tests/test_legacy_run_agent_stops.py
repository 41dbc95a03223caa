"""The legacy ``run_agent`` loop (kernel.md §9): budgets, steps, model failures and cancellation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio
from legacy_helpers import (
    Params,
    asking_tool,
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
from harness_kernel.legacy import (
    Budget,
    BudgetExceededError,
    InvalidModelResponseError,
    RunCanceledError,
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
    PermissionRequest,
    PermissionResolution,
    RulePermissionController,
)
from harness_tools import (
    ToolExecutionContext,
    create_echo_tool,
)
from harness_workspace import (
    AbortController,
    AbortSignal,
)

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
        with_changes(options([tool_turn(call("echo"))], tools=[create_echo_tool()]), max_steps=1)
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
        await run_agent(with_changes(options(model=model), on_event=on_event))
    assert caught.value is failure
    assert seen == ["session.created", "agent.started", "model.request"]
    assert model.requests == ()
