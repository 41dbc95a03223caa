"""The typed error family of the workspace contract.

Codes are the API; messages are for people. Every error here survives ``pickle`` and
``copy`` with its code and operation intact, because errors cross process and thread
boundaries (trio worker threads, the agent server's event store).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "WORKSPACE_OPERATION_MALFORMED",
    "WORKSPACE_OPERATION_REQUIRED",
    "WORKSPACE_OPERATION_UNKNOWN",
    "WORKSPACE_OPERATION_UNSUPPORTED",
    "WorkspaceEscapesRootError",
    "WorkspaceOperationError",
    "WorkspaceOperationMalformedError",
    "WorkspaceOperationRequiredError",
    "WorkspaceOperationUnknownError",
    "WorkspaceOperationUnsupportedError",
]

WORKSPACE_OPERATION_REQUIRED: Final = "WORKSPACE_OPERATION_REQUIRED"
WORKSPACE_OPERATION_MALFORMED: Final = "WORKSPACE_OPERATION_MALFORMED"
WORKSPACE_OPERATION_UNKNOWN: Final = "WORKSPACE_OPERATION_UNKNOWN"
WORKSPACE_OPERATION_UNSUPPORTED: Final = "WORKSPACE_OPERATION_UNSUPPORTED"


class WorkspaceOperationError(Exception):
    """Base class of every typed failure at the workspace capability boundary.

    Args:
        code: The stable machine-readable code callers branch on.
        message: Human-readable text; it may change between releases.
        operation: The workspace operation concerned, when one is known.
    """

    code: str
    operation: str | None

    def __init__(self, code: str, message: str, operation: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.operation = operation

    @property
    def message(self) -> str:
        """The human-readable message, identical to ``str(error)``."""
        return str(self.args[0]) if self.args else ""

    def __reduce__(self) -> tuple[object, ...]:
        # Subclasses take different constructor arguments; rebuild through the base
        # initialiser so pickling keeps class, code, message and operation.
        return (_rebuild_error, (type(self), self.code, self.message, self.operation), self.__dict__)

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(code={self.code!r}, message={self.message!r}, operation={self.operation!r})"


def _rebuild_error(
    cls: type[WorkspaceOperationError], code: str, message: str, operation: str | None
) -> WorkspaceOperationError:
    error = cls.__new__(cls)
    WorkspaceOperationError.__init__(error, code, message, operation)
    return error


class WorkspaceOperationRequiredError(WorkspaceOperationError):
    """A workspace capability (or an operation request) was needed but not supplied."""

    def __init__(self, message: str = "workspace capability is required") -> None:
        super().__init__(WORKSPACE_OPERATION_REQUIRED, message, None)


class WorkspaceOperationMalformedError(WorkspaceOperationError):
    """A request, a capability or an adapter's result does not have the contract's shape."""

    def __init__(self, message: str, operation: str | None = None) -> None:
        super().__init__(WORKSPACE_OPERATION_MALFORMED, message, operation)


class WorkspaceOperationUnknownError(WorkspaceOperationError):
    """The requested operation name is not one of the seven in the vocabulary."""

    def __init__(self, operation: str) -> None:
        super().__init__(WORKSPACE_OPERATION_UNKNOWN, f"unknown workspace operation: {operation}", operation)


class WorkspaceOperationUnsupportedError(WorkspaceOperationError):
    """The capability exists in the vocabulary but this workspace (or view) does not provide it."""

    def __init__(self, operation: str, message: str | None = None) -> None:
        if message is None:
            message = f"workspace does not support operation: {operation}"
        super().__init__(WORKSPACE_OPERATION_UNSUPPORTED, message, operation)


class WorkspaceEscapesRootError(ValueError):
    """A lexically resolved path lies outside the root of a :class:`WorkspacePathScope`.

    Args:
        requested: The path exactly as it was requested.
        root: The scope's absolute root.
    """

    requested: str
    root: str

    def __init__(self, requested: str, root: str) -> None:
        super().__init__(f'path "{requested}" escapes the workspace root "{root}"')
        self.requested = requested
        self.root = root

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.requested, self.root), self.__dict__)
