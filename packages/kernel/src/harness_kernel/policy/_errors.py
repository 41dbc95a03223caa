"""The typed errors of the rule engine and the permission port."""

from __future__ import annotations

from typing import Final

from harness_kernel._errors import HarnessError

__all__ = [
    "POLICY_INVALID_INPUT",
    "POLICY_INVALID_RULES",
    "InvalidPermissionRulesError",
    "InvalidPolicyInputError",
]

POLICY_INVALID_RULES: Final = "POLICY_INVALID_RULES"
POLICY_INVALID_INPUT: Final = "POLICY_INVALID_INPUT"


class InvalidPermissionRulesError(HarnessError):
    """A permission map is malformed: not a mapping, a non-``str`` key, or a bad effect."""

    def __init__(self, message: str) -> None:
        super().__init__(POLICY_INVALID_RULES, message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message,))


class InvalidPolicyInputError(HarnessError):
    """Any other policy input is malformed: an action, a subject, a glob, a path or a record field."""

    def __init__(self, message: str) -> None:
        super().__init__(POLICY_INVALID_INPUT, message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message,))
