"""The legacy one-call agent loop (kernel.md §9), the agent server's entry point.

``await run_agent(RunOptions(...))`` runs a whole conversation with a one-shot
:class:`~harness_kernel.models.Model` and returns a :class:`RunResult`; every event passes
``on_event`` before the run goes on. Budget, cancellation and malformed-model failures
raise their typed errors after the final ``agent.stopped``.
"""

from harness_kernel.legacy._loop import run_agent
from harness_kernel.legacy._records import (
    Budget,
    BudgetExceededError,
    InvalidModelResponseError,
    InvalidToolResultError,
    RunCanceledError,
    RunOptions,
    RunResult,
    ToolExecutionError,
    normalize_tool_json,
)

__all__ = [
    "Budget",
    "BudgetExceededError",
    "InvalidModelResponseError",
    "InvalidToolResultError",
    "RunCanceledError",
    "RunOptions",
    "RunResult",
    "ToolExecutionError",
    "normalize_tool_json",
    "run_agent",
]
