"""harness-kernel: events, message state, models, policy, task manifests and the event store.

The submodules are the public surface (``harness_kernel.events``, ``state``, ``models``,
``policy``, ``manifest``, ``store``). The package root re-exports the message-state names
(the runtime's and the legacy loop's will join them) and the workspace contract types, the
very objects of ``harness_workspace``.
"""

from harness_kernel._errors import HarnessError, is_harness_error
from harness_kernel.state import (
    InvalidMessageStateError,
    ModelContext,
    VersionedMessageState,
    append_message,
    build_model_context,
    create_message_state,
)
from harness_workspace import CommandRequest, CommandResult, Workspace, WorkspaceCapability, WorkspaceSnapshot

__all__ = [
    "CommandRequest",
    "CommandResult",
    "HarnessError",
    "InvalidMessageStateError",
    "ModelContext",
    "VersionedMessageState",
    "Workspace",
    "WorkspaceCapability",
    "WorkspaceSnapshot",
    "append_message",
    "build_model_context",
    "create_message_state",
    "is_harness_error",
]
