"""The pure rule engine: a permission map, an action and an optional subject give a decision."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final, Literal, TypeAlias, TypeGuard, final

import msgspec

from harness_kernel.policy._errors import InvalidPermissionRulesError, InvalidPolicyInputError
from harness_kernel.policy._exact import is_mapping, is_str
from harness_kernel.policy._glob import GlobSyntax, compile_glob

__all__ = [
    "COMMAND_ACTIONS",
    "EFFECTS",
    "RANK",
    "CompiledRules",
    "Decision",
    "Effect",
    "PermissionMap",
    "Rule",
    "compile_rules",
    "decide",
    "glob_syntax_for",
    "is_effect",
]

Effect: TypeAlias = Literal["allow", "ask", "deny"]
"""What a rule says about an action: run it, ask an operator, or refuse."""

Rule: TypeAlias = Effect | Mapping[str, Effect]
"""A flat effect, or a map from subject glob to effect (``"*"`` is the fallback)."""

PermissionMap: TypeAlias = Mapping[str, Rule]
"""Action name → rule, e.g. a task manifest's ``permissions``."""

EFFECTS: Final[tuple[Effect, ...]] = ("allow", "ask", "deny")

RANK: Final[Mapping[Effect, int]] = MappingProxyType({"allow": 0, "ask": 1, "deny": 2})
"""How strict each effect is; equally long matching patterns resolve to the strictest."""

_FALLBACK: Final = "*"

COMMAND_ACTIONS: Final[tuple[str, ...]] = ("process.exec",)
"""Actions whose subject is a command line: their patterns are command globs (decision 041)."""


def glob_syntax_for(action: str) -> GlobSyntax:
    """The glob dialect of ``action``'s subject patterns.

    ``"command"`` for :data:`COMMAND_ACTIONS` (``*`` and ``?`` cross ``/``, so
    ``"uv run pytest*"`` admits ``uv run pytest tests/test_a.py``), ``"path"`` for every
    other action.
    """
    return "command" if action in COMMAND_ACTIONS else "path"


def is_effect(value: object) -> TypeGuard[Effect]:
    """Whether ``value`` is exactly one of the strings ``allow``, ``ask`` or ``deny``."""
    # The type test comes first so that no foreign ``__eq__`` runs.
    return is_str(value) and value in EFFECTS


class Decision(msgspec.Struct, frozen=True):
    """The outcome of :func:`decide`.

    Attributes:
        action: The action asked about.
        subject: The subject asked about, or ``None``.
        effect: ``allow``, ``ask`` or ``deny``.
        reason: Why, in words (the exact strings are part of the contract).
        rule: The rule that decided: the flat effect, the (read-only) subject map, or
            ``None`` when the action has no rule.
    """

    action: str
    subject: str | None
    effect: Effect
    reason: str
    rule: Rule | None


# ------------------------------------------------------------------ snapshots

_Pattern: TypeAlias = tuple[str, Effect, Callable[[str], bool]]


@final
class _SubjectRules:
    """One action's subject map, validated, frozen and with its globs compiled."""

    __slots__ = ("fallback", "patterns", "rule")

    rule: Mapping[str, Effect]
    patterns: tuple[_Pattern, ...]
    fallback: Effect | None

    def __init__(self, rule: Mapping[str, Effect], patterns: tuple[_Pattern, ...], fallback: Effect | None):
        self.rule = rule
        self.patterns = patterns
        self.fallback = fallback


_Snapshot: TypeAlias = dict[str, Effect | MappingProxyType[str, Effect]]


def _snapshot(permissions: object) -> _Snapshot:
    """Validate a permission map and copy it into kernel-owned, read-only pieces."""
    if permissions is None:
        return {}
    if not is_mapping(permissions):
        raise InvalidPermissionRulesError("permission rules must be a dict or a read-only mapping")
    items = list(permissions.items())
    snapshot: _Snapshot = {}
    for action, rule in items:
        if not is_str(action):
            raise InvalidPermissionRulesError("permission rule keys (actions) must be str")
        if is_effect(rule):
            snapshot[action] = rule
            continue
        if not is_mapping(rule):
            raise InvalidPermissionRulesError(
                f'rule for "{action}" must be allow, ask, deny or a mapping of subject patterns'
            )
        subjects: dict[str, Effect] = {}
        for pattern, effect in list(rule.items()):
            if not is_str(pattern):
                raise InvalidPermissionRulesError(f'subject patterns for "{action}" must be str')
            if not is_effect(effect):
                raise InvalidPermissionRulesError(
                    f'effect for "{action}" pattern "{pattern}" must be allow, ask or deny'
                )
            subjects[pattern] = effect
        snapshot[action] = MappingProxyType(subjects)
    return snapshot


def _compile_entry(action: str, entry: Effect | MappingProxyType[str, Effect]) -> Effect | _SubjectRules:
    if not isinstance(entry, MappingProxyType):
        return entry
    syntax = glob_syntax_for(action)
    patterns: tuple[_Pattern, ...] = tuple(
        (pattern, effect, compile_glob(pattern, syntax=syntax).test)
        for pattern, effect in entry.items()
        if pattern != _FALLBACK
    )
    return _SubjectRules(entry, patterns, entry.get(_FALLBACK))


def _check_request(action: object, subject: object) -> None:
    if not is_str(action):
        raise InvalidPolicyInputError("action must be a str")
    if subject is not None and not is_str(subject):
        raise InvalidPolicyInputError("subject must be a str or None")


def _evaluate(action: str, subject: str | None, compiled: Effect | _SubjectRules | None) -> Decision:
    """The five steps of the rule engine, shared by :func:`decide` and :class:`CompiledRules`."""
    if compiled is None:
        return Decision(action, subject, "ask", f'no rule for action "{action}"; safe default is ask', None)
    if not isinstance(compiled, _SubjectRules):
        return Decision(action, subject, compiled, f'flat rule for "{action}"', compiled)
    if subject is not None:
        best: tuple[str, Effect] | None = None
        for pattern, effect, test in compiled.patterns:
            if not test(subject):
                continue
            # Longest pattern wins; equal lengths go to the strictest effect; full ties keep
            # the first pattern in map order.
            if (
                best is None
                or len(pattern) > len(best[0])
                or (len(pattern) == len(best[0]) and RANK[effect] > RANK[best[1]])
            ):
                best = (pattern, effect)
        if best is not None:
            return Decision(action, subject, best[1], f'subject matched pattern "{best[0]}"', compiled.rule)
    if compiled.fallback is not None:
        if subject is None:
            reason = 'fallback "*" (no subject to match)'
        else:
            reason = 'no pattern matched; fallback "*"'
        return Decision(action, subject, compiled.fallback, reason, compiled.rule)
    if subject is not None:
        return Decision(
            action,
            subject,
            "deny",
            "no pattern matched and no fallback rule; closed by default",
            compiled.rule,
        )
    return Decision(
        action,
        subject,
        "ask",
        "no flat rule and no subject to match patterns against; safe default is ask",
        compiled.rule,
    )


# ------------------------------------------------------------------ public engine


def decide(permissions: PermissionMap | None, action: str, subject: str | None = None) -> Decision:
    """Decide one action (and optional subject) against a permission map.

    The first applicable step wins: no rule → ask; a flat rule → its effect; the longest
    matching subject pattern other than ``"*"`` (ties deny > ask > allow); the ``"*"``
    fallback; otherwise deny when a subject was given (closed by default), else ask.
    Patterns are path globs, except for :data:`COMMAND_ACTIONS`, whose patterns are
    command globs (see :func:`glob_syntax_for`).

    Args:
        permissions: ``None``, or an exact ``dict`` (or read-only ``MappingProxyType``) of
            action → effect or action → {subject glob → effect}.
        action: The action, e.g. ``"process.exec"``.
        subject: What the action applies to, e.g. a command line, or ``None``.

    Raises:
        InvalidPermissionRulesError: the permission map is malformed.
        InvalidPolicyInputError: ``action`` is not a ``str``, or ``subject`` is neither a
            ``str`` nor ``None``.
    """
    _check_request(action, subject)
    entry = _snapshot(permissions).get(action)
    return _evaluate(action, subject, None if entry is None else _compile_entry(action, entry))


@final
class CompiledRules:
    """A permission map validated and compiled once; see :func:`compile_rules`."""

    __slots__ = ("_entries",)

    def __init__(self, entries: dict[str, Effect | _SubjectRules]) -> None:
        self._entries = entries

    def decide(self, action: str, subject: str | None = None) -> Decision:
        """Decide like :func:`decide` on the compiled map: same effect, reason and rule.

        Raises:
            InvalidPolicyInputError: ``action`` is not a ``str``, or ``subject`` is neither
                a ``str`` nor ``None``.
        """
        _check_request(action, subject)
        return _evaluate(action, subject, self._entries.get(action))

    def actions(self) -> tuple[str, ...]:
        """The actions that have a rule, in map order."""
        return tuple(self._entries)

    def __repr__(self) -> str:
        return f"<CompiledRules actions={self.actions()!r}>"


def compile_rules(permissions: PermissionMap | None) -> CompiledRules:
    """Validate and precompile a permission map for repeated decisions.

    The map is copied: later changes to the caller's objects have no effect.

    Raises:
        InvalidPermissionRulesError: the permission map is malformed.
    """
    return CompiledRules(
        {action: _compile_entry(action, entry) for action, entry in _snapshot(permissions).items()}
    )
