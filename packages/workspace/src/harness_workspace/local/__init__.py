"""``LocalWorkspace``: the host-filesystem adapter of the Workspace contract.

Every operation works below one root directory, opened once as a directory descriptor.
Paths are resolved *relative to that descriptor*, never as checked strings: with
``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`` where the kernel
has it, otherwise by a component-by-component walk with ``O_NOFOLLOW``; both refuse every
symlink, so the file opened is the one the path names. Absolute paths, ``..`` above the
root, symlinks (inside or leaving the root), NUL bytes and over-long names are refused
with a :class:`LocalWorkspaceError` carrying a stable code.

``diff`` and ``snapshot`` run no program: they read the repository below the root
themselves (``harness_workspace.local._git``), so nothing the repository configures (filter or
diff drivers, hooks, fsmonitor) can choose a program to run, and they write nothing.

This is containment of *paths*, not an operating-system sandbox: a command run through
:meth:`LocalWorkspace.execute` starts inside the root but has the user's full authority.
"""

from harness_workspace.local._adapter import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_LIST_ENTRIES,
    LocalWorkspace,
    ResolverChoice,
)
from harness_workspace.local._committed import read_committed_file
from harness_workspace.local._errors import (
    LOCAL_WORKSPACE_ERROR_CODES,
    WORKSPACE_COMMAND_ABORTED,
    WORKSPACE_COMMAND_FAILED_TO_START,
    WORKSPACE_COMMAND_NOT_FOUND,
    WORKSPACE_DISPOSED,
    WORKSPACE_GIT_FAILED,
    WORKSPACE_GIT_TOO_LARGE,
    WORKSPACE_GIT_UNAVAILABLE,
    WORKSPACE_GIT_UNSUPPORTED,
    WORKSPACE_INVALID_UTF8,
    WORKSPACE_IO_FAILED,
    WORKSPACE_LINKED_FILE,
    WORKSPACE_LIST_TOO_LARGE,
    WORKSPACE_NOT_A_DIRECTORY,
    WORKSPACE_NOT_A_FILE,
    WORKSPACE_NOT_A_REPOSITORY,
    WORKSPACE_NOT_FOUND,
    WORKSPACE_OUTPUT_TOO_LARGE,
    WORKSPACE_PATH_ESCAPES_ROOT,
    WORKSPACE_PATH_INVALID,
    WORKSPACE_PATH_PROTECTED,
    WORKSPACE_PATH_TOO_LONG,
    WORKSPACE_PROTECTED_PATH_CHANGED,
    WORKSPACE_SECRET_WITHHELD,
    WORKSPACE_SYMLINK_REFUSED,
    WORKSPACE_TIMEOUT_TOO_LARGE,
    WORKSPACE_TOO_LARGE,
    LocalWorkspaceError,
)
from harness_workspace.local._output import HeadTailOutput
from harness_workspace.local._process import OutputSink, ProcessLimits, SupervisedExit, supervise_process
from harness_workspace.local._protected import PROTECTED_HOST_PATHS

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_LIST_ENTRIES",
    "LOCAL_WORKSPACE_ERROR_CODES",
    "PROTECTED_HOST_PATHS",
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
    "HeadTailOutput",
    "LocalWorkspace",
    "LocalWorkspaceError",
    "OutputSink",
    "ProcessLimits",
    "ResolverChoice",
    "SupervisedExit",
    "read_committed_file",
    "supervise_process",
]
