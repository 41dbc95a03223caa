"""The legacy one-call agent loop (kernel.md §9): the agent server's entry point.

One awaited call runs the whole conversation: a model request per step, then every tool
call the model asked for, each recorded as events that pass ``on_event`` (the durability
fence) before anything with an effect happens.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal, TypedDict, TypeVar, cast

import trio
from msgspec import UNSET, UnsetType

from harness_kernel._gate import (
    ToolGate,
    ToolInputError,
    Verdict,
    budget_percent,
    convert_arguments,
    cut_reason,
    permission_intent,
    resolution_of,
    static_attribute,
    tool_definitions,
    typed_error_code,
    valid_text,
)
from harness_kernel._ids import now_timestamp, random_id
from harness_kernel._json import (
    MAX_SAFE_INTEGER,
    JsonValue,
    encode_json,
    has_lone_surrogate,
    is_exact_array,
)
from harness_kernel.events._codec import create_event
from harness_kernel.events._model import (
    AgentStartedData,
    AgentStoppedData,
    BarePolicyDecisionData,
    BudgetWarningData,
    ErrorData,
    Event,
    EventData,
    EventType,
    EventUsage,
    ModelRequestData,
    ModelResponseData,
    PermissionRequestedData,
    PermissionResolvedData,
    SessionCreatedData,
    ToolCallData,
    ToolResultData,
    ToolResultErrorData,
)
from harness_kernel.legacy._records import (
    INVALID_TOOL_RESULT_MESSAGE,
    MODEL_INVALID_RESPONSE,
    RUN_CANCELED,
    TOOL_EXECUTION_FAILED,
    TOOL_INVALID_RESULT,
    BudgetExceededError,
    InvalidModelResponseError,
    InvalidToolResultError,
    RunCanceledError,
    RunOptions,
    RunResult,
    normalize_tool_json,
)
from harness_kernel.models._types import (
    AssistantMessage,
    ChatMessage,
    CompletionRequest,
    CompletionResponse,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
    add_usage,
    empty_usage,
)
from harness_kernel.policy._permission import (
    PermissionRequest,
    PermissionResolution,
)
from harness_tools import Tool, ToolExecutionContext, ToolPermissionIntent
from harness_workspace import (
    AbortController,
    AbortSignal,
    Workspace,
    bind_workspace,
    move_on_abort,
)

__all__ = ["run_agent"]

_ERROR_CODE: Final = re.compile(r"[A-Z0-9_]{2,80}")
_MAX_RESPONSE_ID_CHARS: Final = 512
_MAX_CONTENT_JSON_BYTES: Final = 512 * 1024
_MAX_CALLS: Final = 128
_MAX_CALL_ID_CHARS: Final = 512
_MAX_TOOL_NAME_CHARS: Final = 256
_MAX_ACTION_CHARS: Final = 256
_MAX_TRANSCRIPT_BYTES: Final = 4 * 1024 * 1024
_FINISH_REASONS: Final = ("stop", "tool_calls", "length", "error")

_AUTHORIZATION_FAILED: Final = "TOOL_AUTHORIZATION_FAILED"
_CANCELED_NOTE: Final = "abort signal received"

_Status = Literal["completed", "failed", "canceled", "budget_exceeded"]
_Metric = Literal["tokens", "tool_calls"]
_T = TypeVar("_T")


def _given(value: _T | None) -> _T | UnsetType:
    """An optional field of a payload: ``None`` leaves it out of the event."""
    return UNSET if value is None else value


class _PermissionFields(TypedDict):
    """What a permission request and both of its events say alike (their subject differs:
    ``None`` on the request, left out of the events)."""

    permission_id: str
    session_id: str
    call_id: str
    action: str
    scope: Literal["once", "run"]


def _event_usage(usage: Usage) -> EventUsage:
    return EventUsage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
    )


def _is_safe_count(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER


class _Stop(Exception):
    """Internal: the run has ended; ``error`` is raised, or ``result`` returned."""

    def __init__(self, outcome: BaseException | RunResult) -> None:
        super().__init__("run stopped")
        self.outcome = outcome


class _Loop:
    """The state of one legacy run; every effect waits for the event before it."""

    def __init__(self, options: RunOptions) -> None:
        if type(options) is not RunOptions:
            raise TypeError("run_agent expects RunOptions")
        self.options = options
        self.now: Callable[[], str] = options.now or now_timestamp
        self.new_id: Callable[[str], str] = options.new_id or random_id
        self.on_event = options.on_event
        model_name: object = getattr(options.model, "name", None)
        if not valid_text(model_name, 1, 256):
            raise ValueError("model.name must be a str of 1..256 characters")
        self.model_name = cast(str, model_name)
        complete: object = getattr(options.model, "complete", None)
        if not callable(complete):
            raise TypeError("model must have a callable complete")
        self.complete = cast("Callable[[CompletionRequest], Awaitable[CompletionResponse]]", complete)
        if options.signal is not None and type(options.signal) is not AbortSignal:
            raise TypeError("signal must be an AbortSignal")
        self.signal = options.signal
        self.run_signal = options.signal if options.signal is not None else AbortController().signal
        self.workspace: Workspace | None = (
            None if options.workspace_capability is None else bind_workspace(options.workspace_capability)
        )
        self.decide, self.resolve = _capture_permission(options.permission)
        budget = options.budget
        self.max_tokens = None if budget is None else budget.max_model_tokens
        self.max_calls = None if budget is None else budget.max_tool_calls
        for limit in (self.max_tokens, self.max_calls, options.max_steps):
            if limit is not None and not _is_safe_count(limit):
                raise ValueError("budget limits and max_steps must be safe integers >= 0")
        self.tools: dict[str, Tool[Any]] = {tool.name: tool for tool in options.tools or ()}
        self.gate = ToolGate(workspace=self.workspace, decide=self.decide, profile="legacy")
        self.definitions = tool_definitions(self.tools.values(), workspace_injected=True, profile="legacy")
        self.session_id = options.session_id if options.session_id is not None else self.new_id("sess")
        self.task_id = options.task_id
        self.agent_id = ""
        self.events: list[Event] = []
        self.messages: list[ChatMessage] = [UserMessage(options.goal)]
        self.usage = empty_usage()
        self.steps = 0
        self.tool_calls = 0
        self.text = ""
        self.transcript_bytes = 0
        self.warned_tokens = False
        self.warned_calls = False

    # -------------------------------------------------------------- events

    async def emit(self, type: EventType, data: EventData, *, actor: str = "kernel") -> None:
        at = self.now()
        event_id = self.new_id("evt")
        event = create_event(type, data, event_id=event_id, at=at, actor=actor)
        self.events.append(event)
        if self.on_event is not None:
            await self.on_event(event)

    async def stop(self, status: _Status, note: str | None = None) -> None:
        await self.emit(
            "agent.stopped",
            AgentStoppedData(
                agent_id=self.agent_id,
                status=status,
                steps=self.steps,
                tool_calls=self.tool_calls,
                note=_given(note),
            ),
        )

    async def error_event(self, code: str, message: str, *, retryable: bool = False) -> None:
        await self.emit("error", ErrorData(code=code, message=message, retryable=retryable))

    async def warn(self, metric: _Metric, used: int, limit: int) -> None:
        await self.emit(
            "budget.warning",
            BudgetWarningData(
                task_id=_given(self.task_id),
                metric=metric,
                used=used,
                limit=limit,
                pct=budget_percent(used, limit),
            ),
        )

    async def fail(self, code: str, message: str, error: BaseException, *, retryable: bool = False) -> _Stop:
        await self.error_event(code, message, retryable=retryable)
        await self.stop("failed", message)
        return _Stop(error)

    async def canceled(self, note: str, *, model_call: bool = False) -> _Stop:
        if model_call:
            await self.error_event(RUN_CANCELED, "agent run canceled")
        await self.stop("canceled", note)
        return _Stop(RunCanceledError())

    async def check_signal(self) -> None:
        if self.signal is not None and self.signal.aborted:
            raise await self.canceled(_CANCELED_NOTE)

    async def over_tokens(self, limit: int) -> _Stop:
        await self.warn("tokens", self.usage.total_tokens, limit)
        await self.stop("budget_exceeded", f"max_model_tokens={limit}")
        return _Stop(BudgetExceededError("max_model_tokens", self.usage.total_tokens, limit))

    # -------------------------------------------------------------- run

    async def run(self) -> RunResult:
        await self.emit(
            "session.created",
            SessionCreatedData(session_id=self.session_id, workspace=_given(self.options.workspace)),
        )
        self.agent_id = self.new_id("agent")
        await self.emit(
            "agent.started",
            AgentStartedData(
                agent_id=self.agent_id,
                session_id=self.session_id,
                task_id=_given(self.task_id),
                model=self.model_name,
            ),
        )
        try:
            while self.steps < self.options.max_steps:
                await self.step()
        except _Stop as stop:
            outcome = stop.outcome
        else:
            note = f"max_steps={self.options.max_steps} reached without a final answer"
            await self.stop("failed", note)
            return self.result("failed")
        if isinstance(outcome, RunResult):
            return outcome
        # Raised outside the handler, so the error keeps its own cause and context.
        raise outcome

    def result(self, status: Literal["completed", "failed"]) -> RunResult:
        return RunResult(
            status=status,
            text=self.text,
            usage=self.usage,
            steps=self.steps,
            tool_calls=self.tool_calls,
            events=tuple(self.events),
        )

    async def step(self) -> None:
        await self.check_signal()
        if self.max_tokens is not None and self.usage.total_tokens >= self.max_tokens:
            raise await self.over_tokens(self.max_tokens)
        self.steps += 1
        request_id = self.new_id("req")
        await self.emit(
            "model.request",
            ModelRequestData(request_id=request_id, model=self.model_name, message_count=len(self.messages)),
        )
        response = await self.call_model(request_id)
        await self.emit(
            "model.response",
            ModelResponseData(
                request_id=request_id,
                model=self.model_name,
                finish_reason=response.finish_reason,
                usage=_event_usage(response.usage),
            ),
        )
        total = add_usage(self.usage, response.usage)
        problem = None if total.total_tokens <= MAX_SAFE_INTEGER else "cumulative usage overflows"
        calls: tuple[tuple[ToolCall, JsonValue], ...] = ()
        if problem is None:
            problem, calls = self.check_calls(response)
        if problem is not None:
            raise await self.fail(MODEL_INVALID_RESPONSE, problem, InvalidModelResponseError(problem))
        self.usage = total
        self.text = response.content
        if self.max_tokens is not None:
            if self.usage.total_tokens > self.max_tokens:
                raise await self.over_tokens(self.max_tokens)
            if not self.warned_tokens and 2 * self.usage.total_tokens >= self.max_tokens:
                self.warned_tokens = True
                await self.warn("tokens", self.usage.total_tokens, self.max_tokens)
        if response.finish_reason == "length":
            message = "model output ended at the provider length limit"
            await self.error_event("MODEL_OUTPUT_TRUNCATED", message)
            await self.stop("failed", message)
            raise _Stop(self.result("failed"))
        self.messages.append(AssistantMessage(response.content, tuple(call for call, _ in calls) or None))
        if response.finish_reason == "stop":
            await self.stop("completed")
            raise _Stop(self.result("completed"))
        if self.max_tokens is not None and self.usage.total_tokens >= self.max_tokens:
            raise await self.over_tokens(self.max_tokens)
        for call, arguments in calls:
            await self.tool_call(call, arguments)

    # -------------------------------------------------------------- model

    async def call_model(self, request_id: str) -> CompletionResponse:
        request = CompletionRequest(messages=tuple(self.messages), tools=self.definitions, signal=self.signal)
        outcome: list[object] = []
        failure: Exception | None = None
        try:
            if self.signal is None:
                outcome.append(await self.complete(request))
            else:
                with move_on_abort(self.signal):
                    outcome.append(await self.complete(request))
        except Exception as error:
            failure = error
        if self.signal is not None and self.signal.aborted:
            raise await self.canceled(_CANCELED_NOTE, model_call=True)
        if failure is not None:
            await self.failed_response(request_id)
            code = static_attribute(failure, "code")
            retryable = static_attribute(failure, "retryable")
            message = f"model completion failed for {self.model_name}"
            raise await self.fail(
                code if type(code) is str and _ERROR_CODE.fullmatch(code) else "MODEL_COMPLETION_FAILED",
                message,
                failure,
                retryable=retryable if type(retryable) is bool else False,
            )
        response = outcome[0]
        problem = _response_problem(response)
        if problem is not None:
            await self.failed_response(request_id)
            raise await self.fail(MODEL_INVALID_RESPONSE, problem, InvalidModelResponseError(problem))
        return cast(CompletionResponse, response)

    async def failed_response(self, request_id: str) -> None:
        await self.emit(
            "model.response",
            ModelResponseData(
                request_id=request_id,
                model=self.model_name,
                finish_reason="error",
                usage=_event_usage(empty_usage()),
            ),
        )

    def check_calls(
        self, response: CompletionResponse
    ) -> tuple[str | None, tuple[tuple[ToolCall, JsonValue], ...]]:
        """Checks made after ``model.response``: finish/calls agreement and the arguments."""
        if response.finish_reason == "error":
            return "model reported an error finish", ()
        if (response.finish_reason == "tool_calls") != bool(response.tool_calls):
            return "finish reason and tool calls disagree", ()
        checked: list[tuple[ToolCall, JsonValue]] = []
        transcript = self.transcript_bytes
        for call in response.tool_calls:
            if not valid_text(call.id, 1, _MAX_CALL_ID_CHARS) or not call.id.strip():
                return "tool call id must be a str of 1..512 characters", ()
            if not valid_text(call.name, 1, _MAX_TOOL_NAME_CHARS) or not call.name.strip():
                return "tool call name must be a str of 1..256 characters", ()
            try:
                arguments, wire = normalize_tool_json(call.arguments)
            except InvalidToolResultError:
                return "tool call arguments are not a bounded JSON value", ()
            transcript += len(wire)
            if transcript > _MAX_TRANSCRIPT_BYTES:
                return "tool transcript exceeds 4 MiB", ()
            checked.append((call, arguments))
        self.transcript_bytes = transcript
        return None, tuple(checked)

    # -------------------------------------------------------------- tools

    async def tool_call(self, call: ToolCall, arguments: JsonValue) -> None:
        await self.check_signal()
        if self.max_calls is not None:
            if self.tool_calls >= self.max_calls:
                await self.warn("tool_calls", self.tool_calls, self.max_calls)
                await self.stop("budget_exceeded", f"max_tool_calls={self.max_calls}")
                raise _Stop(BudgetExceededError("max_tool_calls", self.tool_calls, self.max_calls))
            if not self.warned_calls and self.tool_calls >= self.max_calls - 1:
                self.warned_calls = True
                await self.warn("tool_calls", self.tool_calls, self.max_calls)
        call_id = self.new_id("call")
        self.tool_calls += 1
        await self.emit("tool.call", ToolCallData(call_id=call_id, tool=call.name, input=arguments))
        started = trio.current_time()
        output, error = await self.observe(call, arguments, call_id)
        duration_ms = max(0, int((trio.current_time() - started) * 1000))
        if error is None:
            data = ToolResultData(
                call_id=call_id, tool=call.name, ok=True, output=output, duration_ms=duration_ms
            )
            content = encode_json(output).decode()
        else:
            code, message = error
            failure = ToolResultErrorData(code=code, message=message)
            data = ToolResultData(
                call_id=call_id, tool=call.name, ok=False, error=failure, duration_ms=duration_ms
            )
            content = encode_json({"error": {"code": code, "message": message}}).decode()
        await self.emit("tool.result", data)
        self.messages.append(ToolMessage(content, call.name, call.id))

    async def observe(
        self, call: ToolCall, arguments: JsonValue, call_id: str
    ) -> tuple[JsonValue, tuple[str, str] | None]:
        """Authorize and execute one call; return its output or ``(code, message)``."""
        tool = self.tools.get(call.name)
        if tool is None:
            return None, ("TOOL_NOT_FOUND", f"unknown tool: {call.name}")
        try:
            params = convert_arguments(tool, arguments)
        except ToolInputError as bad:
            return None, ("TOOL_BAD_INPUT", str(bad))
        if self.gate.judged(tool):
            # The checked conversion is authorization's own; execution converts again (§8.6
            # step 4), so neither can alter what the other sees.
            verdict = self.gate.judge(tool, permission_intent(tool, params))
            if verdict.failed_closed:
                return await self.authorization_failed(call.name)
            denial = await self.authorize(tool, verdict, call_id)
            if denial is not None:
                return None, denial
        if self.signal is not None and self.signal.aborted:
            raise await self.canceled_call(call.name, call_id, _CANCELED_NOTE)
        return await self.execute(tool, call, arguments, call_id, self.gate.capability(tool))

    async def authorization_failed(self, name: str) -> tuple[JsonValue, tuple[str, str]]:
        await self.error_event(_AUTHORIZATION_FAILED, f"authorization failed for tool {name}")
        return None, (_AUTHORIZATION_FAILED, "tool authorization failed closed")

    async def authorize(self, tool: Tool[Any], verdict: Verdict, call_id: str) -> tuple[str, str] | None:
        """Publish the decision (and any permission exchange); return a denial or ``None``."""
        intent = verdict.intent
        decision = BarePolicyDecisionData(
            action=intent.action,
            subject=_given(intent.subject),
            effect=verdict.effect,
            reason=verdict.reason,
            rule_id=_given(verdict.rule_id),
        )
        await self.emit("policy.decision", decision)
        if verdict.effect == "deny":
            return verdict.denial, verdict.reason
        if verdict.effect == "allow" or self.gate.granted(intent):
            return None
        return await self.ask(tool.name, intent, verdict.reason, call_id)

    async def ask(
        self,
        name: str,
        intent: ToolPermissionIntent,
        reason: str,
        call_id: str,
    ) -> tuple[str, str] | None:
        scope = intent.scope or "once"
        shared = _PermissionFields(
            permission_id=self.new_id("perm"),
            session_id=self.session_id,
            call_id=call_id,
            action=intent.action,
            scope=scope,
        )
        subject = _given(intent.subject)
        requested = PermissionRequestedData(**shared, subject=subject, reason=reason)
        await self.emit("permission.requested", requested)
        request = PermissionRequest(**shared, subject=intent.subject, reason=reason)
        answer, canceled = await self.wait_for_answer(request)
        actor = "kernel" if type(answer) is str else "operator"
        resolution = PermissionResolution("deny", answer) if type(answer) is str else answer
        assert type(resolution) is PermissionResolution
        resolved = PermissionResolvedData(
            **shared, subject=subject, decision=resolution.decision, note=_given(resolution.note)
        )
        await self.emit("permission.resolved", resolved, actor=actor)
        if canceled:
            raise await self.canceled_call(name, call_id, f"{_CANCELED_NOTE} while awaiting permission")
        if resolution.decision == "deny":
            return "TOOL_PERMISSION_DENIED", resolution.note or "operator denied permission"
        self.gate.grant(intent)
        return None

    async def wait_for_answer(self, request: PermissionRequest) -> tuple[PermissionResolution | str, bool]:
        """Await the resolver; a ``str`` answer is a synthesized denial's note."""
        if self.resolve is None:
            return "no permission resolver", False
        answer: list[object] = []
        failed = False
        try:
            with move_on_abort(self.run_signal):
                pending = self.resolve(request, self.run_signal)
                answer.append(await pending if inspect.isawaitable(pending) else pending)
        except Exception:
            failed = True
        if self.run_signal.aborted:
            return "run canceled while awaiting permission", True
        resolution = None if failed or not answer else resolution_of(answer[0])
        if resolution is None:
            return "permission resolver failed", False
        return resolution, False

    async def execute(
        self, tool: Tool[Any], call: ToolCall, arguments: JsonValue, call_id: str, view: Workspace | None
    ) -> tuple[JsonValue, tuple[str, str] | None]:
        try:
            params = convert_arguments(tool, arguments)
        except ToolInputError as bad:
            return None, ("TOOL_BAD_INPUT", str(bad))
        context = ToolExecutionContext(
            signal=self.run_signal,
            workspace=view,
            session_id=self.session_id,
            task_id=self.task_id,
            call_id=call_id,
        )
        result: list[object] = []
        failure: tuple[str, str] | None = None
        try:
            with move_on_abort(self.run_signal):
                pending: object = tool.execute(params, context)
                result.append(await pending if inspect.isawaitable(pending) else pending)
        except Exception as error:
            failure = (typed_error_code(error) or TOOL_EXECUTION_FAILED, cut_reason(str(error)))
        if self.run_signal.aborted:
            raise await self.canceled_call(call.name, call_id, f"{_CANCELED_NOTE} during tool execution")
        if failure is not None:
            return None, failure
        try:
            output, wire = normalize_tool_json(result[0])
        except InvalidToolResultError:
            return None, (TOOL_INVALID_RESULT, INVALID_TOOL_RESULT_MESSAGE)
        if self.transcript_bytes + len(wire) > _MAX_TRANSCRIPT_BYTES:
            return None, (TOOL_INVALID_RESULT, INVALID_TOOL_RESULT_MESSAGE)
        self.transcript_bytes += len(wire)
        return output, None

    async def canceled_call(self, name: str, call_id: str, note: str) -> _Stop:
        error = ToolResultErrorData(code="TOOL_CANCELED", message="tool canceled")
        await self.emit("tool.result", ToolResultData(call_id=call_id, tool=name, ok=False, error=error))
        return await self.canceled(note)


def _capture_permission(
    permission: object,
) -> tuple[
    Callable[[ToolPermissionIntent], object] | None, Callable[[PermissionRequest, AbortSignal], object] | None
]:
    """Capture ``decide`` and the optional ``resolve`` once, so later replacement has no effect."""
    if permission is None:
        return None, None
    decide: object = getattr(permission, "decide", None)
    if not callable(decide):
        raise TypeError("permission must have a callable decide")
    resolve: object = getattr(permission, "resolve", None)
    return (
        cast("Callable[[ToolPermissionIntent], object]", decide),
        cast("Callable[[PermissionRequest, AbortSignal], object]", resolve) if callable(resolve) else None,
    )


def _response_problem(response: object) -> str | None:
    """Checks made before ``model.response``; ``None`` when the response is well formed."""
    if type(response) is not CompletionResponse:
        return "model response must be a CompletionResponse"
    if not valid_text(response.id, 1, _MAX_RESPONSE_ID_CHARS):
        return "model response id must be a str of 1..512 characters"
    if type(response.content) is not str or has_lone_surrogate(response.content):
        return "model response content must be a str"
    if len(encode_json(response.content)) > _MAX_CONTENT_JSON_BYTES:
        return "model response content exceeds 512 KiB"
    calls: object = response.tool_calls
    if not is_exact_array(calls):
        return "model response tool calls must be a sequence"
    items = calls
    if len(items) > _MAX_CALLS:
        return f"model response has more than {_MAX_CALLS} tool calls"
    if any(type(item) is not ToolCall for item in items):
        return "model response tool calls must be ToolCall values"
    usage: object = response.usage
    if type(usage) is not Usage:
        return "model response usage must be a Usage"
    counts = (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens)
    if not all(_is_safe_count(count) for count in counts):
        return "model response usage must hold safe integers >= 0"
    if usage.total_tokens != usage.prompt_tokens + usage.completion_tokens:
        return "model response usage total must equal prompt + completion"
    if type(response.finish_reason) is not str or response.finish_reason not in _FINISH_REASONS:
        return "model response finish reason is not valid"
    return None


async def run_agent(options: RunOptions) -> RunResult:
    """Run one legacy agent conversation to its end (kernel.md §9).

    Every event is built with ``now()`` then ``new_id("evt")`` and awaited through
    ``options.on_event`` before the run goes on; ``agent.stopped`` is always the last one.

    Raises:
        BudgetExceededError: a token or tool-call limit stopped the run.
        RunCanceledError: ``options.signal`` was aborted.
        InvalidModelResponseError: the model answered something malformed.
        Exception: what ``model.complete`` or ``on_event`` raised, unchanged.
        TypeError, ValueError: ``options`` are malformed (nothing was emitted).
    """
    return await _Loop(options).run()
