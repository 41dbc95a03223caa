"""The typed errors of harness-tools. Codes are the API; messages are for people."""

from __future__ import annotations

from typing import Final

__all__ = [
    "TOOL_ARGUMENTS_INVALID",
    "TOOL_EXECUTION_BOUNDARY_INVALID",
    "TOOL_WORKSPACE_INVALID_ROOT",
    "TOOL_WORKSPACE_PATH_INVALID",
    "TOOL_WORKSPACE_READ_FAILED",
    "TOOL_WORKSPACE_TOO_LARGE",
    "InvalidToolArgumentsError",
    "InvalidToolExecutionBoundaryError",
    "InvalidWorkspacePathError",
    "ToolError",
    "WorkspaceFileAccessError",
]

TOOL_EXECUTION_BOUNDARY_INVALID: Final = "TOOL_EXECUTION_BOUNDARY_INVALID"
TOOL_ARGUMENTS_INVALID: Final = "TOOL_ARGUMENTS_INVALID"
TOOL_WORKSPACE_INVALID_ROOT: Final = "TOOL_WORKSPACE_INVALID_ROOT"
TOOL_WORKSPACE_TOO_LARGE: Final = "TOOL_WORKSPACE_TOO_LARGE"
TOOL_WORKSPACE_READ_FAILED: Final = "TOOL_WORKSPACE_READ_FAILED"
TOOL_WORKSPACE_PATH_INVALID: Final = "TOOL_WORKSPACE_PATH_INVALID"


class ToolError(Exception):
    """Base class of every typed harness-tools failure; ``code`` is stable.

    Args:
        code: The stable machine-readable code callers branch on.
        message: Human-readable text; it may change between releases.
    """

    code: str

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code

    @property
    def message(self) -> str:
        """The human-readable message, identical to ``str(error)``."""
        return str(self.args[0]) if self.args else ""

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_error, (type(self), self.code, self.message), self._pickled_state())

    def _pickled_state(self) -> dict[str, object]:
        """The instance dictionary pickling restores (the one place that hands it out)."""
        return self.__dict__  # harness-import-boundary: allow IB002 -- this error's own pickled state

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


def _rebuild_error(cls: type[ToolError], code: str, message: str) -> ToolError:
    error = ToolError.__new__(cls)
    ToolError.__init__(error, code, message)
    return error


class InvalidToolExecutionBoundaryError(ToolError):
    """An execution boundary failed validation, or a tool already has one."""

    def __init__(self, message: str) -> None:
        super().__init__(TOOL_EXECUTION_BOUNDARY_INVALID, message)


class WorkspaceFileAccessError(ToolError):
    """A workspace-reading tool could not deliver a file (invalid root, too large, not text)."""


class InvalidToolArgumentsError(ToolError):
    """Model-supplied arguments do not fit the tool's parameters or the argument limits.

    Attributes:
        path: Where in the arguments the problem is, as a JSONPath-like string (``$.path``).
    """

    path: str

    def __init__(self, message: str, path: str = "$") -> None:
        super().__init__(TOOL_ARGUMENTS_INVALID, message)
        self.path = path

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message, self.path), self._pickled_state())


class InvalidWorkspacePathError(ToolError, ValueError):
    """A workspace path from a model is not in the canonical form (see ``check_workspace_path``).

    It is also a ``ValueError`` so that msgspec, meeting it in a parameters Struct's
    ``__post_init__`` during ``msgspec.convert``, reports it as a ``ValidationError`` like
    any other invalid argument (the original stays attached as ``__cause__``).

    Attributes:
        suggestion: The canonical spelling of the same path, when one exists (``./a.py``
            → ``a.py``); ``None`` when there is none (``..``, an absolute path, a control
            character).
    """

    suggestion: str | None

    def __init__(self, message: str, suggestion: str | None = None) -> None:
        super().__init__(TOOL_WORKSPACE_PATH_INVALID, message)
        self.suggestion = suggestion

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message, self.suggestion), self._pickled_state())
