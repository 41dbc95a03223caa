"""The typed error family of the local (host filesystem) workspace adapter.

Every failure of :class:`~harness_workspace.local.LocalWorkspace` (and of its process and
git helpers) is a :class:`LocalWorkspaceError` carrying one of the stable codes below.
Codes are the API; messages are for people. The class pickles with its code, message and
operation through :class:`~harness_workspace.WorkspaceOperationError`.
"""

from __future__ import annotations

from typing import Final

from harness_workspace._errors import WorkspaceOperationError

__all__ = [
    "LOCAL_WORKSPACE_ERROR_CODES",
    "WORKSPACE_COMMAND_ABORTED",
    "WORKSPACE_COMMAND_FAILED_TO_START",
    "WORKSPACE_COMMAND_NOT_FOUND",
    "WORKSPACE_DISPOSED",
    "WORKSPACE_GIT_FAILED",
    "WORKSPACE_GIT_TOO_LARGE",
    "WORKSPACE_GIT_UNAVAILABLE",
    "WORKSPACE_GIT_UNSUPPORTED",
    "WORKSPACE_INVALID_UTF8",
    "WORKSPACE_IO_FAILED",
    "WORKSPACE_LINKED_FILE",
    "WORKSPACE_LIST_TOO_LARGE",
    "WORKSPACE_NOT_A_DIRECTORY",
    "WORKSPACE_NOT_A_FILE",
    "WORKSPACE_NOT_A_REPOSITORY",
    "WORKSPACE_NOT_FOUND",
    "WORKSPACE_OUTPUT_TOO_LARGE",
    "WORKSPACE_PATH_ESCAPES_ROOT",
    "WORKSPACE_PATH_INVALID",
    "WORKSPACE_PATH_PROTECTED",
    "WORKSPACE_PATH_TOO_LONG",
    "WORKSPACE_PROTECTED_PATH_CHANGED",
    "WORKSPACE_SECRET_WITHHELD",
    "WORKSPACE_SYMLINK_REFUSED",
    "WORKSPACE_TIMEOUT_TOO_LARGE",
    "WORKSPACE_TOO_LARGE",
    "LocalWorkspaceError",
]

WORKSPACE_PATH_INVALID: Final = "WORKSPACE_PATH_INVALID"
"""The path is malformed: empty where a file is needed, absolute, contains NUL, not text."""
WORKSPACE_PATH_TOO_LONG: Final = "WORKSPACE_PATH_TOO_LONG"
"""A component exceeds NAME_MAX (255 bytes) or the whole path exceeds PATH_MAX (4096 bytes)."""
WORKSPACE_PATH_ESCAPES_ROOT: Final = "WORKSPACE_PATH_ESCAPES_ROOT"
"""Resolving the path would leave the root (``..`` past the root, a symlink pointing out, a magic link)."""
WORKSPACE_SYMLINK_REFUSED: Final = "WORKSPACE_SYMLINK_REFUSED"
"""The path goes through a symlink the adapter will not follow (fallback resolver, or a write target)."""
WORKSPACE_NOT_FOUND: Final = "WORKSPACE_NOT_FOUND"
"""The file or directory (or a parent directory) does not exist."""
WORKSPACE_NOT_A_FILE: Final = "WORKSPACE_NOT_A_FILE"
"""The path names something other than a regular file (directory, FIFO, device, socket)."""
WORKSPACE_NOT_A_DIRECTORY: Final = "WORKSPACE_NOT_A_DIRECTORY"
"""A directory was needed (list, parent, working directory) and the path names something else."""
WORKSPACE_LINKED_FILE: Final = "WORKSPACE_LINKED_FILE"
"""The write target has more than one hard link; replacing it would silently split the links."""
WORKSPACE_TOO_LARGE: Final = "WORKSPACE_TOO_LARGE"
"""A file to read, or contents to write, exceeds the byte cap."""
WORKSPACE_INVALID_UTF8: Final = "WORKSPACE_INVALID_UTF8"
"""The file's bytes are not valid UTF-8 (or the contents to write cannot be encoded)."""
WORKSPACE_SECRET_WITHHELD: Final = "WORKSPACE_SECRET_WITHHELD"
"""The path is on the credential deny list (``harness_workspace.credentials``); nothing of it was read."""
WORKSPACE_LIST_TOO_LARGE: Final = "WORKSPACE_LIST_TOO_LARGE"
"""A listing would exceed the entry bound; nothing is silently truncated."""
WORKSPACE_IO_FAILED: Final = "WORKSPACE_IO_FAILED"
"""Any other operating-system failure (permission, disk full, I/O error)."""
WORKSPACE_DISPOSED: Final = "WORKSPACE_DISPOSED"
"""The workspace was disposed; only ``dispose`` may still be called."""
WORKSPACE_COMMAND_NOT_FOUND: Final = "WORKSPACE_COMMAND_NOT_FOUND"
"""The program of ``execute`` could not be found."""
WORKSPACE_COMMAND_FAILED_TO_START: Final = "WORKSPACE_COMMAND_FAILED_TO_START"
"""The program exists but could not be started (permission, exec format)."""
WORKSPACE_COMMAND_ABORTED: Final = "WORKSPACE_COMMAND_ABORTED"
"""The command's AbortSignal was aborted; its process group was stopped and reaped."""
WORKSPACE_TIMEOUT_TOO_LARGE: Final = "WORKSPACE_TIMEOUT_TOO_LARGE"
"""The requested ``timeout_ms`` exceeds the configured maximum."""
WORKSPACE_OUTPUT_TOO_LARGE: Final = "WORKSPACE_OUTPUT_TOO_LARGE"
"""A command's (or git's) output exceeded its byte cap where truncation is not acceptable."""
WORKSPACE_PATH_PROTECTED: Final = "WORKSPACE_PATH_PROTECTED"
"""``write_file`` named a protected path (``protected_paths``); nothing was written."""
WORKSPACE_PROTECTED_PATH_CHANGED: Final = "WORKSPACE_PROTECTED_PATH_CHANGED"
"""A command changed protected paths; they were put back as they were before it ran."""
WORKSPACE_GIT_UNAVAILABLE: Final = "WORKSPACE_GIT_UNAVAILABLE"
"""No longer raised: ``diff`` and ``snapshot`` read the repository without a git program.

Kept so that code catching it still imports; it meant "``git`` is not installed or could not
be run"."""
WORKSPACE_GIT_FAILED: Final = "WORKSPACE_GIT_FAILED"
"""The repository could not be read: a missing or corrupt object, ref or pack, or the time limit."""
WORKSPACE_GIT_UNSUPPORTED: Final = "WORKSPACE_GIT_UNSUPPORTED"
"""The repository uses a layout or format the reader refuses rather than follows.

``.git/commondir``, ``objects/info/alternates``, ``objects/info/http-alternates``, a
repository format version above 1, an unknown ``extensions.*`` key (``refStorage =
reftable`` included) or an unreadable ``.git/config``: each would make the reader look
outside the root or guess."""
WORKSPACE_GIT_TOO_LARGE: Final = "WORKSPACE_GIT_TOO_LARGE"
"""The repository or work tree exceeds a bound of the reader (object size, entries, bytes hashed)."""
WORKSPACE_NOT_A_REPOSITORY: Final = "WORKSPACE_NOT_A_REPOSITORY"
"""``diff`` or ``snapshot`` needs the root to be a git work tree and it is not."""

LOCAL_WORKSPACE_ERROR_CODES: Final[frozenset[str]] = frozenset(
    {
        WORKSPACE_PATH_INVALID,
        WORKSPACE_PATH_TOO_LONG,
        WORKSPACE_PATH_ESCAPES_ROOT,
        WORKSPACE_SYMLINK_REFUSED,
        WORKSPACE_NOT_FOUND,
        WORKSPACE_NOT_A_FILE,
        WORKSPACE_NOT_A_DIRECTORY,
        WORKSPACE_LINKED_FILE,
        WORKSPACE_TOO_LARGE,
        WORKSPACE_INVALID_UTF8,
        WORKSPACE_LIST_TOO_LARGE,
        WORKSPACE_SECRET_WITHHELD,
        WORKSPACE_IO_FAILED,
        WORKSPACE_DISPOSED,
        WORKSPACE_COMMAND_NOT_FOUND,
        WORKSPACE_COMMAND_FAILED_TO_START,
        WORKSPACE_COMMAND_ABORTED,
        WORKSPACE_TIMEOUT_TOO_LARGE,
        WORKSPACE_OUTPUT_TOO_LARGE,
        WORKSPACE_GIT_UNAVAILABLE,
        WORKSPACE_GIT_FAILED,
        WORKSPACE_GIT_UNSUPPORTED,
        WORKSPACE_GIT_TOO_LARGE,
        WORKSPACE_NOT_A_REPOSITORY,
        WORKSPACE_PATH_PROTECTED,
        WORKSPACE_PROTECTED_PATH_CHANGED,
    }
)
"""Every code a :class:`LocalWorkspaceError` may carry."""


class LocalWorkspaceError(WorkspaceOperationError):
    """A typed failure of the local workspace adapter.

    Args:
        code: One of :data:`LOCAL_WORKSPACE_ERROR_CODES`.
        message: Human-readable text; it may change between releases.
        operation: The workspace operation concerned, when one is known.
    """

    def __init__(self, code: str, message: str, operation: str | None = None) -> None:
        super().__init__(code, message, operation)
