"""harness-kernel: events, models, policy, manifests, the event store and the runtime.

The submodules are the public surface (``harness_kernel.events``, ``models``, ``policy``,
``manifest``, ``store``, ``runtime``, ``legacy``, ``evals``). The package root re-exports
the public names of ``runtime`` and ``legacy``, and the workspace contract types, the very
objects of ``harness_workspace``.
"""

from harness_kernel._errors import HarnessError
from harness_kernel.legacy import (
    Budget,
    BudgetExceededError,
    InvalidModelResponseError,
    InvalidToolResultError,
    RunCanceledError,
    RunOptions,
    RunResult,
    ToolExecutionError,
    normalize_tool_json,
    run_agent,
)
from harness_kernel.runtime import (
    AgentRuntimeError,
    EventAppendError,
    InvalidRunInputError,
    MinimalAgentRuntime,
    ModelStreamError,
    ModelTimeoutError,
    RunAlreadyExistsError,
    RunInput,
    RunNotFoundError,
    RunStream,
    RunTerminalError,
    RuntimeBudget,
    RuntimeBudgetExceededError,
    RuntimeConsumerError,
    SteeringClosedError,
)
from harness_workspace import CommandRequest, CommandResult, Workspace, WorkspaceCapability, WorkspaceSnapshot

__all__ = [
    "AgentRuntimeError",
    "Budget",
    "BudgetExceededError",
    "CommandRequest",
    "CommandResult",
    "EventAppendError",
    "HarnessError",
    "InvalidModelResponseError",
    "InvalidRunInputError",
    "InvalidToolResultError",
    "MinimalAgentRuntime",
    "ModelStreamError",
    "ModelTimeoutError",
    "RunAlreadyExistsError",
    "RunCanceledError",
    "RunInput",
    "RunNotFoundError",
    "RunOptions",
    "RunResult",
    "RunStream",
    "RunTerminalError",
    "RuntimeBudget",
    "RuntimeBudgetExceededError",
    "RuntimeConsumerError",
    "SteeringClosedError",
    "ToolExecutionError",
    "Workspace",
    "WorkspaceCapability",
    "WorkspaceSnapshot",
    "normalize_tool_json",
    "run_agent",
]
