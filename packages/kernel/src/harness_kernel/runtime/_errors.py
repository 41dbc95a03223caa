"""The runtime's error family (spec §8.1): every error is an ``AgentRuntimeError`` with a stable ``code``."""

from __future__ import annotations

from typing import Literal, TypeAlias

from harness_kernel._errors import HarnessError

__all__ = [
    "AgentRuntimeError",
    "BudgetMetric",
    "ContextCompactionError",
    "ContextOverflowError",
    "EventAppendError",
    "FollowUpError",
    "InvalidRunInputError",
    "ModelStreamError",
    "ModelTimeoutError",
    "RunAlreadyExistsError",
    "RunNotFoundError",
    "RunTerminalError",
    "RuntimeBudgetExceededError",
    "RuntimeConsumerError",
    "SteeringClosedError",
    "TurnActiveError",
]

BudgetMetric: TypeAlias = Literal["steps", "tokens", "tool_calls"]


class AgentRuntimeError(HarnessError):
    """Base class of every error the runtime raises on purpose."""


class InvalidRunInputError(AgentRuntimeError):
    """A run input, a control argument or a value returned by an injected callable is invalid."""

    def __init__(self, message: str) -> None:
        super().__init__("RUNTIME_INVALID_INPUT", message)


class RunAlreadyExistsError(AgentRuntimeError):
    """The run id is live or tombstoned on this runtime."""

    def __init__(self, run_id: str) -> None:
        super().__init__("RUNTIME_RUN_EXISTS", f'run "{run_id}" already exists')
        self.run_id = run_id


class RunNotFoundError(AgentRuntimeError):
    """No run with this id was ever registered on this runtime."""

    def __init__(self, run_id: str) -> None:
        super().__init__("RUNTIME_RUN_NOT_FOUND", f'run "{run_id}" not found')
        self.run_id = run_id


class RunTerminalError(AgentRuntimeError):
    """The run is finishing or finished; ``status`` says how far it got."""

    def __init__(self, run_id: str, status: str) -> None:
        super().__init__("RUNTIME_RUN_TERMINAL", f'run "{run_id}" is {status}')
        self.run_id = run_id
        self.status = status


class SteeringClosedError(AgentRuntimeError):
    """Steering is closed once the first model request has started."""

    def __init__(self, run_id: str) -> None:
        super().__init__("RUNTIME_STEERING_CLOSED", f'steering is closed for run "{run_id}"')
        self.run_id = run_id


class EventAppendError(AgentRuntimeError):
    """The event store failed to append an event; the store's exception is the ``__cause__``."""

    def __init__(self, event_type: str) -> None:
        super().__init__("RUNTIME_EVENT_APPEND_FAILED", f"failed to append {event_type} event")
        self.event_type = event_type


class ModelStreamError(AgentRuntimeError):
    """The model stream broke the frame contract, failed, or reported an unusable finish."""

    def __init__(self, message: str) -> None:
        super().__init__("RUNTIME_MODEL_STREAM_INVALID", message)


class ModelTimeoutError(AgentRuntimeError):
    """A model round outlived ``model_timeout_ms``."""

    def __init__(self, timeout_ms: int) -> None:
        super().__init__("RUNTIME_MODEL_TIMEOUT", f"model round timed out after {timeout_ms} ms")
        self.timeout_ms = timeout_ms


class RuntimeBudgetExceededError(AgentRuntimeError):
    """A budget metric ran out; the message is the terminal note."""

    def __init__(self, metric: BudgetMetric, used: int, limit: int) -> None:
        super().__init__("RUNTIME_BUDGET_EXCEEDED", f"{metric} budget exhausted ({used}/{limit})")
        self.metric: BudgetMetric = metric
        self.used = used
        self.limit = limit


class RuntimeConsumerError(AgentRuntimeError):
    """The stream was used against its contract (claimed twice, or stepped concurrently)."""

    def __init__(self, message: str) -> None:
        super().__init__("RUNTIME_CONSUMER_INVALID", message)


class TurnActiveError(AgentRuntimeError):
    """A turn of this session is still running on this runtime; a new one may not run beside it."""

    def __init__(self, session_id: str, run_id: str) -> None:
        super().__init__("RUNTIME_TURN_ACTIVE", f'session "{session_id}" has an active turn (run "{run_id}")')
        self.session_id = session_id
        self.run_id = run_id


class FollowUpError(AgentRuntimeError):
    """A follow-up turn broke a rule of its session (no earlier turn, new context, another store)."""

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__("RUNTIME_FOLLOW_UP_INVALID", f'follow-up on session "{session_id}": {reason}')
        self.session_id = session_id
        self.reason = reason


class ContextOverflowError(AgentRuntimeError):
    """The context, with the reserve kept for the answer, does not fit the model's window."""

    def __init__(self, occupancy: int, reserve: int, window: int) -> None:
        super().__init__(
            "RUNTIME_CONTEXT_OVERFLOW",
            f"context occupancy {occupancy} + reserve {reserve} exceeds the window {window}",
        )
        self.occupancy = occupancy
        self.reserve = reserve
        self.window = window


class ContextCompactionError(AgentRuntimeError):
    """A context summary is unusable; the message says why."""

    def __init__(self, message: str) -> None:
        super().__init__("RUNTIME_CONTEXT_COMPACTION_FAILED", message)
