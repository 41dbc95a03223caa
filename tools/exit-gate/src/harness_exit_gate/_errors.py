"""The gate's typed errors: each carries a stable ``code`` (codes are the API)."""

from __future__ import annotations

from typing import Final

__all__ = [
    "COMMAND_INVALID",
    "REPORT_INVALID",
    "CommandParseError",
    "ExitGateError",
    "GitCheckError",
    "RunReportError",
]

COMMAND_INVALID: Final = "TEST_COMMAND_INVALID"
REPORT_INVALID: Final = "REPORT_INVALID"


class ExitGateError(Exception):
    """Base class of the gate's errors.

    Args:
        code: The stable machine-readable code.
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
        return (_rebuild, (type(self), self.code, self.message))


def _rebuild(kind: type[ExitGateError], code: str, message: str) -> ExitGateError:
    error = kind.__new__(kind)
    ExitGateError.__init__(error, code, message)
    return error


class CommandParseError(ExitGateError):
    """A test command string cannot be split into an argv (exit-gate.md §7)."""

    def __init__(self, message: str) -> None:
        super().__init__(COMMAND_INVALID, message)


class RunReportError(ExitGateError):
    """A run report, preflight report or report artifact breaks its schema or an invariant."""

    def __init__(self, message: str) -> None:
        super().__init__(REPORT_INVALID, message)


class GitCheckError(ExitGateError):
    """A git check failed; ``code`` is one of the ``GIT_*`` codes of exit-gate.md §6."""
