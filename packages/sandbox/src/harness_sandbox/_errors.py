"""The typed errors of the sandbox workspace.

File operations fail with :class:`~harness_workspace.local.LocalWorkspaceError` codes, exactly
as :class:`~harness_workspace.local.LocalWorkspace` does (the sandbox reads and writes its
copy through one); commands fail with the same ``WORKSPACE_COMMAND_*`` codes. What only a
sandbox can get wrong is a :class:`SandboxError` with one of the codes below.
"""

from __future__ import annotations

from typing import Final

from harness_workspace import WorkspaceOperationError

__all__ = [
    "SANDBOX_COPY_FAILED",
    "SANDBOX_DISK_LIMIT",
    "SANDBOX_DISPOSE_FAILED",
    "SANDBOX_ENGINE_UNAVAILABLE",
    "SANDBOX_ERROR_CODES",
    "SANDBOX_IDS_UNAVAILABLE",
    "SANDBOX_IMAGE_NOT_PINNED",
    "SANDBOX_SOURCE_INVALID",
    "SANDBOX_START_FAILED",
    "SandboxError",
]

SANDBOX_ENGINE_UNAVAILABLE: Final = "SANDBOX_ENGINE_UNAVAILABLE"
"""The chosen engine cannot run here; the message says what is missing. Never a fallback."""
SANDBOX_IMAGE_NOT_PINNED: Final = "SANDBOX_IMAGE_NOT_PINNED"
"""The image is not named by digest (``name@sha256:…``) and floating tags were not allowed."""
SANDBOX_START_FAILED: Final = "SANDBOX_START_FAILED"
"""The engine is there but the isolated environment did not start."""
SANDBOX_SOURCE_INVALID: Final = "SANDBOX_SOURCE_INVALID"
"""The source tree to copy is missing, not a directory, or not readable."""
SANDBOX_COPY_FAILED: Final = "SANDBOX_COPY_FAILED"
"""The disposable copy could not be made (an I/O failure); nothing is left behind."""
SANDBOX_DISK_LIMIT: Final = "SANDBOX_DISK_LIMIT"
"""The copy holds more bytes than the workspace's disk limit (at creation, a write or a command)."""
SANDBOX_DISPOSE_FAILED: Final = "SANDBOX_DISPOSE_FAILED"
"""The environment's removal could not be verified; the message names what may be left."""
SANDBOX_IDS_UNAVAILABLE: Final = "SANDBOX_IDS_UNAVAILABLE"
"""No user id of the sandbox's range is free, or the range holds an id a host account uses."""

SANDBOX_ERROR_CODES: Final[frozenset[str]] = frozenset(
    {
        SANDBOX_ENGINE_UNAVAILABLE,
        SANDBOX_IMAGE_NOT_PINNED,
        SANDBOX_START_FAILED,
        SANDBOX_SOURCE_INVALID,
        SANDBOX_COPY_FAILED,
        SANDBOX_DISK_LIMIT,
        SANDBOX_DISPOSE_FAILED,
        SANDBOX_IDS_UNAVAILABLE,
    }
)
"""Every code a :class:`SandboxError` carries."""


class SandboxError(WorkspaceOperationError):
    """A failure only a sandbox has: its engine, image, copy, limits or disposal.

    Args:
        code: One of :data:`SANDBOX_ERROR_CODES`.
        message: For people; the code is the API.
        operation: The workspace operation (``"create"`` for creation), if any.
    """
