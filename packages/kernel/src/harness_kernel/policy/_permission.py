"""The permission port: what a runtime asks a controller, and what an operator answers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, Literal, Protocol, TypeAlias, final

import msgspec

from harness_kernel.policy._errors import InvalidPolicyInputError
from harness_kernel.policy._exact import is_str
from harness_kernel.policy._rules import Effect, PermissionMap, compile_rules, is_effect
from harness_tools import ToolPermissionIntent
from harness_workspace import AbortSignal

__all__ = [
    "MAX_ID_CHARS",
    "MAX_REASON_CHARS",
    "PermissionController",
    "PermissionDecision",
    "PermissionRequest",
    "PermissionResolution",
    "PermissionResolve",
    "RulePermissionController",
]

MAX_ID_CHARS: Final = 256
MAX_REASON_CHARS: Final = 4096
"""Reasons and notes are at most this many code points; generated text is cut to fit."""


def _check_id(value: object, field: str) -> None:
    if not is_str(value) or not 1 <= len(value) <= MAX_ID_CHARS or not value.strip():
        raise InvalidPolicyInputError(
            f"{field} must be a str of 1..{MAX_ID_CHARS} characters, not only whitespace"
        )


def _check_optional_id(value: object, field: str) -> None:
    if value is not None:
        _check_id(value, field)


def _check_text(value: object, field: str) -> None:
    if not is_str(value) or len(value) > MAX_REASON_CHARS:
        raise InvalidPolicyInputError(f"{field} must be a str of at most {MAX_REASON_CHARS} characters")


class PermissionDecision(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A controller's synchronous answer for one permission intent.

    Every field is checked when the record is built or decoded.

    Attributes:
        effect: ``allow``, ``ask`` or ``deny``.
        reason: Why, for people and for the ``policy.decision`` event (≤ 4096 characters).
        rule_id: A stable id of the deciding rule (1..256 characters), or ``None``.

    Raises:
        InvalidPolicyInputError: a field is out of contract.
    """

    effect: Effect
    reason: str
    rule_id: str | None = None

    def __post_init__(self) -> None:
        if not is_effect(self.effect):
            raise InvalidPolicyInputError("effect must be allow, ask or deny")
        _check_text(self.reason, "reason")
        _check_optional_id(self.rule_id, "rule_id")


class PermissionRequest(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a runtime hands a resolver when a decision is ``ask``.

    Attributes:
        permission_id: The id of this request (``permissionId`` in events).
        session_id: The session the tool call belongs to.
        call_id: The tool call waiting for the answer.
        action: The action asked about (1..256 characters).
        subject: What the action applies to (≤ 4096 characters), or ``None``.
        scope: How long an ``allow`` lasts: this call, or the rest of the run.
        reason: The decision's reason (≤ 4096 characters).
        run_id: The run, when the caller has one (the legacy loop does not).
        turn_id: The turn, when the caller has one.

    Raises:
        InvalidPolicyInputError: a field is out of contract.
    """

    permission_id: str
    session_id: str
    call_id: str
    action: str
    subject: str | None = None
    scope: Literal["once", "run"] = "once"
    reason: str = ""
    run_id: str | None = None
    turn_id: str | None = None

    def __post_init__(self) -> None:
        _check_id(self.permission_id, "permission_id")
        _check_id(self.session_id, "session_id")
        _check_id(self.call_id, "call_id")
        _check_id(self.action, "action")
        if self.subject is not None:
            _check_text(self.subject, "subject")
        if not (is_str(self.scope) and self.scope in ("once", "run")):
            raise InvalidPolicyInputError("scope must be once or run")
        _check_text(self.reason, "reason")
        _check_optional_id(self.run_id, "run_id")
        _check_optional_id(self.turn_id, "turn_id")


class PermissionResolution(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An operator's answer to a :class:`PermissionRequest`.

    Attributes:
        decision: ``allow`` or ``deny``; there is no third answer.
        note: Optional text for the ``permission.resolved`` event (≤ 4096 characters).

    Raises:
        InvalidPolicyInputError: a field is out of contract.
    """

    decision: Literal["allow", "deny"]
    note: str | None = None

    def __post_init__(self) -> None:
        if not (is_str(self.decision) and self.decision in ("allow", "deny")):
            raise InvalidPolicyInputError("decision must be allow or deny")
        if self.note is not None:
            _check_text(self.note, "note")


PermissionResolve: TypeAlias = Callable[
    [PermissionRequest, AbortSignal], Awaitable["PermissionResolution | Literal['allow', 'deny']"]
]
"""The shape of an optional ``resolve``: ``async (request, signal) -> resolution``."""


class PermissionController(Protocol):
    """The port a runtime consults for every tool call that needs a decision.

    ``decide`` must answer synchronously and purely; an awaitable answer fails closed. A
    controller may also offer ``async resolve(request, signal)`` (see
    :data:`PermissionResolve`) to settle ``ask`` decisions; a missing or ``None``
    ``resolve`` means nobody can answer, and the runtime denies.
    """

    def decide(self, intent: ToolPermissionIntent) -> PermissionDecision:
        """Decide one intent."""
        ...


@final
class RulePermissionController:
    """A :class:`PermissionController` backed by a permission map.

    ``decide(intent)`` answers ``PermissionDecision(effect, reason)`` (no ``rule_id``) from
    ``compile_rules(permissions).decide(intent.action, intent.subject)``, with the reason cut
    to 4096 characters. A task manifest plugs in through
    ``harness_exit_gate.manifest.manifest_permissions(manifest)``.

    Args:
        permissions: The permission map, compiled (and copied) once here.
        resolve: Becomes this controller's ``resolve``; ``None`` leaves ``ask`` unanswered.

    Raises:
        InvalidPermissionRulesError: the permission map is malformed.
        InvalidPolicyInputError: ``resolve`` is neither callable nor ``None``.
    """

    __slots__ = ("_rules", "resolve")

    resolve: PermissionResolve | None

    def __init__(
        self, permissions: PermissionMap | None, *, resolve: PermissionResolve | None = None
    ) -> None:
        if resolve is not None and not callable(resolve):
            raise InvalidPolicyInputError("resolve must be callable or None")
        self._rules = compile_rules(permissions)
        self.resolve = resolve

    def decide(self, intent: ToolPermissionIntent) -> PermissionDecision:
        """Decide ``intent`` by the compiled rules.

        Raises:
            InvalidPolicyInputError: ``intent`` is not an exact ``ToolPermissionIntent``, or
                its action or subject has the wrong type.
        """
        if type(intent) is not ToolPermissionIntent:
            raise InvalidPolicyInputError("intent must be a ToolPermissionIntent")
        decision = self._rules.decide(intent.action, intent.subject)
        return PermissionDecision(decision.effect, decision.reason[:MAX_REASON_CHARS])

    def __repr__(self) -> str:
        return f"<RulePermissionController actions={self._rules.actions()!r}>"
