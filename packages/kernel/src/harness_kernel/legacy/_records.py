"""The legacy loop's records and errors (kernel.md §9): options, result, budget, typed failures."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Literal

from harness_kernel._bounded import BoundedJsonError, bounded_json
from harness_kernel._errors import HarnessError
from harness_kernel._json import JsonValue
from harness_kernel.events._model import Event
from harness_kernel.models._types import Model, Usage
from harness_kernel.policy._permission import PermissionController
from harness_tools import ToolRegistry
from harness_workspace import AbortSignal, Workspace

__all__ = [
    "BUDGET_EXCEEDED",
    "INVALID_TOOL_RESULT_MESSAGE",
    "MODEL_INVALID_RESPONSE",
    "RUN_CANCELED",
    "TOOL_EXECUTION_FAILED",
    "TOOL_INVALID_RESULT",
    "Budget",
    "BudgetExceededError",
    "InvalidModelResponseError",
    "InvalidToolResultError",
    "RunCanceledError",
    "RunOptions",
    "RunResult",
    "RunStatus",
    "ToolExecutionError",
    "normalize_tool_json",
]

BUDGET_EXCEEDED: Final = "BUDGET_EXCEEDED"
RUN_CANCELED: Final = "RUN_CANCELED"
MODEL_INVALID_RESPONSE: Final = "MODEL_INVALID_RESPONSE"
TOOL_INVALID_RESULT: Final = "TOOL_INVALID_RESULT"
TOOL_EXECUTION_FAILED: Final = "TOOL_EXECUTION_FAILED"
INVALID_TOOL_RESULT_MESSAGE: Final = "tool result is not a bounded JSON value"

RunStatus = Literal["completed", "failed"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Budget:
    """Hard limits of one legacy run; ``None`` means unlimited.

    Attributes:
        max_model_tokens: Cumulative model tokens (prompt + completion) the run may use.
        max_tool_calls: Tool calls the run may make.
    """

    max_model_tokens: int | None = None
    max_tool_calls: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOptions:
    """Everything one :func:`~harness_kernel.legacy.run_agent` call needs.

    Attributes:
        goal: The user's request, the only input message.
        model: The one-shot model; its ``name`` is the audit name in events.
        tools: The tools the model may call (every one is advertised), or ``None``.
        budget: Token and tool-call limits, or ``None``.
        max_steps: The most model requests; exhausting them fails the run.
        task_id: The task the run belongs to, copied into ``agent.started``.
        session_id: The session id; defaults to ``new_id("sess")``.
        workspace: A workspace identity, copied into ``session.created`` only.
        workspace_capability: An operational workspace, bound at the start; workspace
            tools get a one-operation view of it.
        on_event: Awaited with every event before the run goes on (the durability fence);
            an exception fails the run and propagates unchanged.
        permission: The permission controller, or ``None``.
        signal: Aborting it cancels the run at its next check.
        now: The clock (UTC ISO text); defaults to now with milliseconds and ``Z``.
        new_id: The id source; defaults to ``f"{prefix}-{uuid4()}"``.
    """

    goal: str
    model: Model
    tools: ToolRegistry | None = None
    budget: Budget | None = None
    max_steps: int = 8
    task_id: str | None = None
    session_id: str | None = None
    workspace: str | None = None
    workspace_capability: Workspace | None = None
    on_event: Callable[[Event], Awaitable[None]] | None = None
    permission: PermissionController | None = None
    signal: AbortSignal | None = None
    now: Callable[[], str] | None = None
    new_id: Callable[[str], str] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class RunResult:
    """The outcome of a legacy run that ended without raising.

    Attributes:
        status: ``completed``, or ``failed`` (steps exhausted, output truncated).
        text: The final (or last, partial) assistant text.
        usage: Cumulative token usage.
        steps: Model requests made.
        tool_calls: Tool calls made.
        events: Every event of the run, in order.
    """

    status: RunStatus
    text: str
    usage: Usage
    steps: int
    tool_calls: int
    events: tuple[Event, ...]


class BudgetExceededError(HarnessError):
    """A budget limit stopped the run (``budget exceeded: METRIC used=U limit=L``).

    Attributes:
        metric: ``max_model_tokens`` or ``max_tool_calls``.
        used: The amount used when the run stopped.
        limit: The limit.
    """

    def __init__(self, metric: str, used: int, limit: int) -> None:
        super().__init__(BUDGET_EXCEEDED, f"budget exceeded: {metric} used={used} limit={limit}")
        self.metric = metric
        self.used = used
        self.limit = limit

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.metric, self.used, self.limit))


class RunCanceledError(HarnessError):
    """The run's signal was aborted; the run stopped as canceled."""

    def __init__(self) -> None:
        super().__init__(RUN_CANCELED, "agent run canceled")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), ())


class InvalidModelResponseError(HarnessError):
    """The model answered something the loop cannot accept."""

    def __init__(self, message: str) -> None:
        super().__init__(MODEL_INVALID_RESPONSE, message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message,))


class InvalidToolResultError(HarnessError):
    """A tool result (or arguments) is not bounded JSON."""

    def __init__(self, message: str = INVALID_TOOL_RESULT_MESSAGE) -> None:
        super().__init__(TOOL_INVALID_RESULT, message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message,))


class ToolExecutionError(HarnessError):
    """A tool failed; tools may raise it, and the loop records ``TOOL_EXECUTION_FAILED``."""

    def __init__(self, message: str) -> None:
        super().__init__(TOOL_EXECUTION_FAILED, message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message,))


def normalize_tool_json(value: object) -> tuple[JsonValue, bytes]:
    """Check ``value`` as bounded JSON (§8.12) and return its frozen copy and compact bytes.

    Raises:
        InvalidToolResultError: ``value`` is not JSON data, nests 64 deep or more, has over
            10 000 values, holds a container twice, or encodes to over 256 KiB.
    """
    try:
        return bounded_json(value)
    except BoundedJsonError as error:
        raise InvalidToolResultError() from error
