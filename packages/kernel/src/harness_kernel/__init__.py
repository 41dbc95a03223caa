"""harness-kernel: events, policy, task manifests (and, next, state, models, store, runtime).

The submodules are the public surface (``harness_kernel.events``, ``harness_kernel.policy``,
``harness_kernel.manifest``); the package root re-exports the workspace contract types, the
very objects of ``harness_workspace``.
"""

from harness_kernel._errors import HarnessError, is_harness_error
from harness_workspace import CommandRequest, CommandResult, Workspace, WorkspaceCapability, WorkspaceSnapshot

__all__ = [
    "CommandRequest",
    "CommandResult",
    "HarnessError",
    "Workspace",
    "WorkspaceCapability",
    "WorkspaceSnapshot",
    "is_harness_error",
]
