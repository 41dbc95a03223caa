"""The legacy one-call API (kernel.md §9): a facade over ``MinimalAgentRuntime``.

``await run_agent(RunOptions(...))`` runs a whole conversation with a one-shot
:class:`~harness_kernel.models.Model` and returns a :class:`RunResult`; every event passes
``on_event`` before the run goes on. Budget, cancellation and malformed-model failures
raise their typed errors after the final ``agent.stopped``. The runtime runs the
conversation; this facade keeps §9's options, events and errors. The golden scenarios and
older embedders call it; the agent server drives the runtime itself.
"""

from harness_kernel.legacy._facade import run_agent
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
