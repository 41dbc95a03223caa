"""``run_agent``: one legacy conversation, run by ``MinimalAgentRuntime`` (kernel.md §9).

There is one agent loop. ``run_agent`` admits its :class:`RunOptions` as a runtime run and
translates what the runtime reports into §9's events, which pass ``on_event`` (the
durability fence) before the runtime goes on: the runtime waits for the acknowledgement of
each event before anything with an effect, and the facade acknowledges only once the
translated event has passed the fence. The translation owns what §9 fixes differently:

- the event shapes and ids: the ``session.created`` the runtime has not, no run or turn
  ids, a ``durationMs`` on results; every event is stamped ``now()`` then ``new_id("evt")``
  here, and the ids §9 names (``agent``, ``req``, ``call``, ``perm``) are drawn from the
  caller's ``new_id`` when the runtime needs them — in §9's order;
- the budgets and the steps: §9 checks them before a request and before a call, and
  stops before the call that would exceed, so they are checked here, at the boundary the
  runtime reaches just before (the runtime itself gets no limit);
- the one-shot model and its checks (:mod:`~harness_kernel.legacy._model`), every tool
  advertised, an unreviewed tool run like a pure one, and the few texts §9 words otherwise.

When the translation ends the run (a stop, a budget, an ``on_event`` failure), it leaves the
stream; the runtime then ends its own run as canceled, unseen, before any further effect.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, Literal, TypeVar, cast

import msgspec
import trio
from msgspec import UNSET, UnsetType

from harness_kernel._gate import RULE_PREFIX, static_attribute, tool_definitions, valid_text
from harness_kernel._gate import budget_percent as percent
from harness_kernel._ids import now_timestamp, random_id
from harness_kernel._json import MAX_SAFE_INTEGER, encode_json
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
    RuntimePolicyDecisionData,
    SessionCreatedData,
    ToolCallData,
    ToolMessageCompletedData,
    ToolResultData,
    ToolResultErrorData,
    UserMessageCompletedData,
)
from harness_kernel.legacy._inputs import RunIds, UnrecordedEvents, captured_permission, runnable
from harness_kernel.legacy._model import OneShotAdapter, completion_error_code, is_safe_count
from harness_kernel.legacy._records import (
    INVALID_TOOL_RESULT_MESSAGE,
    MODEL_INVALID_RESPONSE,
    RUN_CANCELED,
    BudgetExceededError,
    InvalidModelResponseError,
    RunCanceledError,
    RunOptions,
    RunResult,
)
from harness_kernel.models._types import (
    CompletionRequest,
    CompletionResponse,
    FinishReason,
    Usage,
    add_usage,
    empty_usage,
)
from harness_kernel.runtime import MinimalAgentRuntime, RunInput, RunStream, RuntimeBudget
from harness_tools import (
    ToolRegistry,
)
from harness_workspace import AbortSignal

__all__ = ["run_agent"]

_CANCELED_NOTE: Final = "abort signal received"
_AUTHORIZATION_FAILED: Final = "TOOL_AUTHORIZATION_FAILED"
_FAILED_CLOSED: Final = frozenset({f"{RULE_PREFIX}authorization.invalid", f"{RULE_PREFIX}policy.invalid"})
_UNPOLICED: Final = f"{RULE_PREFIX}m7.pure"
_RUNTIME_MODEL: Final = "run-agent"
"""The model id the runtime is given; §9's events name ``model.name`` instead."""
_TEXTS: Final = {
    "permission resolver failed closed": "permission resolver failed",
    "policy decision failed closed": "tool authorization failed closed",
    "tool result is not bounded JSON": INVALID_TOOL_RESULT_MESSAGE,
}
"""The runtime's words (§8) where §9 fixes other words for the same outcome."""

_Status = Literal["completed", "failed", "canceled", "budget_exceeded"]
_Metric = Literal["tokens", "tool_calls"]
_T = TypeVar("_T")


def _given(value: _T | None) -> _T | UnsetType:
    """An optional field of a payload: ``None`` leaves it out of the event."""
    return UNSET if value is None else value


def _usage(usage: Usage) -> EventUsage:
    return EventUsage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
    )


class _Stop(Exception):
    """Internal: the run has ended; ``outcome`` is raised, or returned."""

    def __init__(self, outcome: BaseException | RunResult) -> None:
        super().__init__("run stopped")
        self.outcome = outcome


class _Facade:
    """One ``run_agent`` call: the runtime run and the translation of its events."""

    def __init__(self, options: RunOptions) -> None:
        if type(options) is not RunOptions:
            raise TypeError("run_agent expects RunOptions")
        self.options = options
        self.now: Callable[[], str] = options.now or now_timestamp
        self.new_id: Callable[[str], str] = options.new_id or random_id
        model_name: object = getattr(options.model, "name", None)
        if not valid_text(model_name, 1, 256):
            raise ValueError("model.name must be a str of 1..256 characters")
        self.model_name = cast(str, model_name)
        complete: object = getattr(options.model, "complete", None)
        if not callable(complete):
            raise TypeError("model must have a callable complete")
        if options.signal is not None and type(options.signal) is not AbortSignal:
            raise TypeError("signal must be an AbortSignal")
        self.signal = options.signal
        budget = options.budget
        self.max_tokens = None if budget is None else budget.max_model_tokens
        self.max_calls = None if budget is None else budget.max_tool_calls
        for limit in (self.max_tokens, self.max_calls, options.max_steps):
            if limit is not None and not is_safe_count(limit):
                raise ValueError("budget limits and max_steps must be safe integers >= 0")
        permission = captured_permission(options.permission, options.signal)
        tools = list(options.tools or ())
        self.model = OneShotAdapter(
            cast("Callable[[CompletionRequest], Awaitable[CompletionResponse]]", complete),
            tool_definitions(tools),
            options.signal,
            lambda: self.usage,
        )
        self.session_id = options.session_id if options.session_id is not None else self.new_id("sess")
        self.ids = RunIds(self.new_id)
        self.stream = MinimalAgentRuntime().run(
            RunInput(
                run_id=self.ids("run"),
                session_id=self.session_id,
                turn_id=self.ids("turn"),
                input=options.goal,
                model=_RUNTIME_MODEL,
                model_adapter=self.model,
                event_store=UnrecordedEvents(),
                tools=ToolRegistry([runnable(tool, permission is not None) for tool in tools]),
                permission=permission,
                budget=RuntimeBudget(max_steps=MAX_SAFE_INTEGER),
                model_timeout_ms=None,
                task_id=options.task_id,
                workspace=options.workspace_capability,
                signal=options.signal,
                new_id=self.ids,
            )
        )
        self.agent_id = ""
        self.events: list[Event] = []
        self.usage = empty_usage()
        self.steps = 0
        self.tool_calls = 0
        self.warned_tokens = False
        self.warned_calls = False
        self.calls_left = 0
        """Calls of the current model answer the runtime has still to make."""
        self.request_id: str | None = None
        """The model request without an answer yet."""
        self.open_call: tuple[str, str] | None = None
        """The call id and tool of the call without a result yet."""
        self.call_started = 0.0
        """When the open call's ``tool.call`` passed the fence."""
        self.canceled_where = " during tool execution"
        """Where a cancellation found the open call (§9's note says it)."""

    # -------------------------------------------------------------- events

    async def emit(self, type: EventType, data: EventData, *, actor: str = "kernel") -> None:
        at = self.now()
        event = create_event(type, data, event_id=self.new_id("evt"), at=at, actor=actor)
        self.events.append(event)
        if self.options.on_event is not None:
            await self.options.on_event(event)

    async def stop(self, status: _Status, note: str | None = None) -> None:
        self.ids.live = False
        stopped = AgentStoppedData(
            agent_id=self.agent_id,
            status=status,
            steps=self.steps,
            tool_calls=self.tool_calls,
            note=_given(note),
        )
        await self.emit("agent.stopped", stopped)

    def result(self, status: Literal["completed", "failed"]) -> _Stop:
        return _Stop(
            RunResult(
                status=status,
                text=self.model.content,
                usage=self.usage,
                steps=self.steps,
                tool_calls=self.tool_calls,
                events=tuple(self.events),
            )
        )

    async def error_event(self, code: str, message: str, *, retryable: bool = False) -> None:
        await self.emit("error", ErrorData(code=code, message=message, retryable=retryable))

    async def warn(self, metric: _Metric, used: int, limit: int) -> None:
        warning = BudgetWarningData(
            task_id=_given(self.options.task_id),
            metric=metric,
            used=used,
            limit=limit,
            pct=percent(used, limit),
        )
        await self.emit("budget.warning", warning)

    async def fail(self, code: str, message: str, error: BaseException, *, retryable: bool = False) -> _Stop:
        await self.error_event(code, message, retryable=retryable)
        await self.stop("failed", message)
        return _Stop(error)

    async def canceled(self, note: str = _CANCELED_NOTE) -> _Stop:
        await self.stop("canceled", note)
        return _Stop(RunCanceledError())

    async def over_tokens(self, limit: int) -> _Stop:
        await self.warn("tokens", self.usage.total_tokens, limit)
        await self.stop("budget_exceeded", f"max_model_tokens={limit}")
        return _Stop(BudgetExceededError("max_model_tokens", self.usage.total_tokens, limit))

    # -------------------------------------------------------------- run

    async def run(self) -> RunResult:
        workspace = _given(self.options.workspace)
        await self.emit(
            "session.created", SessionCreatedData(session_id=self.session_id, workspace=workspace)
        )
        try:
            await self.follow(self.stream)
        except _Stop as stop:
            outcome = stop.outcome
        else:
            raise AssertionError("the runtime ended without agent.stopped")
        finally:
            self.ids.live = False
        if isinstance(outcome, RunResult):
            return outcome
        # Raised outside the handler, so the error keeps its own cause and context.
        raise outcome

    async def follow(self, stream: RunStream) -> None:
        """Translate each event; the runtime goes on only when the translation returns."""
        async with stream:
            async for event in stream:
                await self.translate(event)

    async def translate(self, event: Event) -> None:
        data = event.data
        if type(data) is AgentStartedData:
            self.agent_id = data.agent_id
            started = AgentStartedData(
                agent_id=data.agent_id,
                session_id=self.session_id,
                task_id=_given(self.options.task_id),
                model=self.model_name,
            )
            await self.emit("agent.started", started)
        elif type(data) is UserMessageCompletedData:
            await self.before_request()
        elif type(data) is ModelRequestData:
            self.steps += 1
            self.request_id = data.request_id
            request = ModelRequestData(
                request_id=data.request_id, model=self.model_name, message_count=data.message_count
            )
            await self.emit("model.request", request)
        elif type(data) is ModelResponseData:
            await self.answered(data.finish_reason, data.usage)
        elif event.type == "message.completed" and self.calls_left:
            # The assistant's message, or the last call's: the runtime's next step is a call.
            if type(data) is ToolMessageCompletedData:
                self.calls_left -= 1
            await (self.before_call() if self.calls_left else self.before_request())
        elif type(data) is ToolCallData:
            self.tool_calls += 1
            called = ToolCallData(call_id=data.call_id, tool=data.tool, input=data.input)
            await self.emit("tool.call", called)
            self.open_call = (data.call_id, data.tool)
            self.canceled_where = " during tool execution"
            self.call_started = trio.current_time()
        elif type(data) is RuntimePolicyDecisionData:
            await self.decided(data)
        elif type(data) is PermissionRequestedData:
            await self.requested(data)
        elif type(data) is PermissionResolvedData:
            await self.resolved(data, event.actor)
        elif type(data) is ToolResultData:
            await self.observed(data)
        elif type(data) is AgentStoppedData:
            await self.stopped(data)

    # -------------------------------------------------------------- boundaries

    async def before_request(self) -> None:
        """§9's checks before a model request: the steps, the signal, the token budget."""
        if self.steps >= self.options.max_steps:
            await self.stop("failed", f"max_steps={self.options.max_steps} reached without a final answer")
            raise self.result("failed")
        if self.signal is not None and self.signal.aborted:
            raise await self.canceled()
        if self.max_tokens is not None and self.usage.total_tokens >= self.max_tokens:
            raise await self.over_tokens(self.max_tokens)

    async def before_call(self) -> None:
        """§9's checks before a tool call: the signal, then the call budget (warned one early)."""
        if self.signal is not None and self.signal.aborted:
            raise await self.canceled()
        if self.max_calls is None:
            return
        if self.tool_calls >= self.max_calls:
            await self.warn("tool_calls", self.tool_calls, self.max_calls)
            await self.stop("budget_exceeded", f"max_tool_calls={self.max_calls}")
            raise _Stop(BudgetExceededError("max_tool_calls", self.tool_calls, self.max_calls))
        if not self.warned_calls and self.tool_calls >= self.max_calls - 1:
            self.warned_calls = True
            await self.warn("tool_calls", self.tool_calls, self.max_calls)

    async def answered(self, finish: FinishReason, usage: EventUsage) -> None:
        """``model.response``, then §9's token budget and the finish."""
        assert self.request_id is not None
        response = ModelResponseData(
            request_id=self.request_id, model=self.model_name, finish_reason=finish, usage=usage
        )
        self.request_id = None
        await self.emit("model.response", response)
        answer = Usage(usage.prompt_tokens, usage.completion_tokens, usage.total_tokens)
        self.usage = add_usage(self.usage, answer)
        limit = self.max_tokens
        if limit is not None:
            if self.usage.total_tokens > limit:
                raise await self.over_tokens(limit)
            if not self.warned_tokens and 2 * self.usage.total_tokens >= limit:
                self.warned_tokens = True
                await self.warn("tokens", self.usage.total_tokens, limit)
        if finish == "length":
            message = "model output ended at the provider length limit"
            await self.error_event("MODEL_OUTPUT_TRUNCATED", message)
            await self.stop("failed", message)
            raise self.result("failed")
        if finish == "stop":
            await self.stop("completed")
            raise self.result("completed")
        if limit is not None and self.usage.total_tokens >= limit:
            raise await self.over_tokens(limit)
        self.calls_left = self.model.call_count

    # -------------------------------------------------------------- calls

    async def decided(self, data: RuntimePolicyDecisionData) -> None:
        """The gate's decision, as §9 publishes it: none for an unpoliced pure call, an
        ``error`` for a call that failed closed, the table's rules as ``kernel.`` rules."""
        rule_id = data.rule_id
        if rule_id == _UNPOLICED:
            return
        if rule_id in _FAILED_CLOSED and data.effect == "deny":
            assert self.open_call is not None
            await self.error_event(
                _AUTHORIZATION_FAILED, f"authorization failed for tool {self.open_call[1]}"
            )
            return
        if isinstance(rule_id, str) and rule_id.startswith(RULE_PREFIX):
            rule_id = "kernel." + rule_id.removeprefix(RULE_PREFIX)
        decision = BarePolicyDecisionData(
            action=data.action, subject=data.subject, effect=data.effect, reason=data.reason, rule_id=rule_id
        )
        await self.emit("policy.decision", decision)

    async def requested(self, data: PermissionRequestedData) -> None:
        # §9's permission events are the runtime's without the run and turn ids.
        requested = msgspec.structs.replace(data, run_id=UNSET, turn_id=UNSET)
        await self.emit("permission.requested", requested)

    async def resolved(self, data: PermissionResolvedData, actor: str | UnsetType) -> None:
        note = data.note
        if note == "run canceled while awaiting permission":
            self.canceled_where = " while awaiting permission"
        note = _TEXTS.get(note, note) if isinstance(note, str) else note
        resolved = msgspec.structs.replace(data, run_id=UNSET, turn_id=UNSET, note=note)
        await self.emit("permission.resolved", resolved, actor=actor if isinstance(actor, str) else "kernel")

    async def observed(self, data: ToolResultData) -> None:
        """``tool.result`` with its duration; a call the cancellation ended ends the run."""
        self.open_call = None
        error = data.error
        if isinstance(error, ToolResultErrorData) and self.canceled_call(error):
            await self.emit("tool.result", _canceled_result(data.call_id, data.tool))
            raise await self.canceled(_CANCELED_NOTE + self.canceled_where)
        duration_ms = max(0, int((trio.current_time() - self.call_started) * 1000))
        if isinstance(error, ToolResultErrorData):
            failure = ToolResultErrorData(
                code=error.code, message=self.failure_text(data.tool, error.message)
            )
            result = ToolResultData(
                call_id=data.call_id, tool=data.tool, ok=False, error=failure, duration_ms=duration_ms
            )
        else:
            self.model.transcript_bytes += len(encode_json(data.output))
            result = ToolResultData(
                call_id=data.call_id, tool=data.tool, ok=True, output=data.output, duration_ms=duration_ms
            )
        await self.emit("tool.result", result)

    def canceled_call(self, error: ToolResultErrorData) -> bool:
        return error.code == "TOOL_CANCELED" and self.signal is not None and self.signal.aborted

    @staticmethod
    def failure_text(tool: str, message: str) -> str:
        """§9's message for a failed call: the tool's own error text, not the runtime's sentence."""
        return _TEXTS.get(message, message.removeprefix(f"tool {tool} failed: "))

    # -------------------------------------------------------------- ends

    async def stopped(self, data: AgentStoppedData) -> None:
        """The runtime's end, as §9 ends: a model failure in its shape, a cancellation with
        §9's note; any other failure is the runtime's own, raised after the stop."""
        if data.status == "canceled":
            if self.request_id is not None:
                await self.error_event(RUN_CANCELED, "agent run canceled")
            elif self.open_call is not None:
                await self.emit("tool.result", _canceled_result(*self.open_call))
            raise await self.canceled()
        failure = self.model.failure
        if failure is None or self.request_id is None:
            await self.stop("failed", data.note if isinstance(data.note, str) else None)
            return
        response = failure.response
        answer = ModelResponseData(
            request_id=self.request_id,
            model=self.model_name,
            finish_reason="error" if response is None else response.finish_reason,
            usage=_usage(empty_usage() if response is None else response.usage),
        )
        await self.emit("model.response", answer)
        if failure.problem is not None:
            problem = failure.problem
            raise await self.fail(MODEL_INVALID_RESPONSE, problem, InvalidModelResponseError(problem))
        error = failure.error
        assert error is not None
        retryable = static_attribute(error, "retryable")
        raise await self.fail(
            completion_error_code(static_attribute(error, "code")),
            f"model completion failed for {self.model_name}",
            error,
            retryable=retryable if type(retryable) is bool else False,
        )


def _canceled_result(call_id: str, tool: str) -> ToolResultData:
    """The result of a call the cancellation ended: no output, no duration (§9.6)."""
    error = ToolResultErrorData(code="TOOL_CANCELED", message="tool canceled")
    return ToolResultData(call_id=call_id, tool=tool, ok=False, error=error)


async def run_agent(options: RunOptions) -> RunResult:
    """Run one legacy agent conversation to its end (kernel.md §9), on the runtime.

    Every event is built with ``now()`` then ``new_id("evt")`` and awaited through
    ``options.on_event`` before the run goes on; ``agent.stopped`` is always the last one.

    Raises:
        BudgetExceededError: a token or tool-call limit stopped the run.
        RunCanceledError: ``options.signal`` was aborted.
        InvalidModelResponseError: the model answered something malformed.
        Exception: what ``model.complete`` or ``on_event`` raised, unchanged.
        TypeError, ValueError: ``options`` are malformed (nothing was emitted).
    """
    return await _Facade(options).run()
