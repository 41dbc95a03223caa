"""The kernel's error base: every typed kernel error has a stable ``code``."""

from __future__ import annotations

from typing import TypeGuard

__all__ = ["HarnessError", "is_harness_error"]


class HarnessError(Exception):
    """Base class of the kernel's typed errors. Codes are the API; messages are for people.

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

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


def is_harness_error(value: object) -> TypeGuard[HarnessError]:
    """Whether ``value`` is one of the kernel's typed errors."""
    return isinstance(value, HarnessError)
