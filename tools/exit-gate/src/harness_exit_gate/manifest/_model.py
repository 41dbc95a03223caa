"""The task-manifest model: strict schema checks that report every issue, then msgspec.

The model is pure: it takes text or already decoded objects and never touches files.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Final, Literal, TypeAlias, final

import msgspec

from harness_exit_gate.manifest._exact import (
    has_lone_surrogate,
    is_effect,
    is_exact_array,
    is_mapping,
    is_str,
)
from harness_exit_gate.manifest._yaml import (
    ROOT,
    SYNTAX,
    describe_kind,
    is_refused,
    join_path,
    read_yaml_document,
)
from harness_kernel import HarnessError
from harness_kernel.policy import EFFECTS, Effect, PermissionMap, Rule

__all__ = [
    "DELIVERY_TYPES",
    "MANIFEST_INVALID",
    "MAX_MANIFEST_BYTES",
    "RESERVED_ACTIONS",
    "Delivery",
    "DeliveryType",
    "ManifestIssue",
    "ManifestParseError",
    "TaskBudget",
    "TaskManifest",
    "decode_task_manifest",
    "load_task_manifest",
    "manifest_permissions",
]

MANIFEST_INVALID: Final = "MANIFEST_INVALID"
MAX_MANIFEST_BYTES: Final = 256 * 1024
"""A manifest's text is at most this many UTF-8 bytes."""

RESERVED_ACTIONS: Final = ("git.branch", "workspace.path_scope")
"""Actions the exit gate decides itself; a manifest that defines one is invalid."""

_PATH_SUBJECT_ACTIONS: Final = ("fs.read", "fs.list", "fs.write")
"""Actions whose subject is a workspace path: their patterns are relative path globs."""

_NO_SUBJECT_ACTIONS: Final = ("git.diff",)
"""Actions that carry no subject: only a flat effect can decide them."""

DeliveryType: TypeAlias = Literal["pull_request", "merge", "artifact", "none"]
DELIVERY_TYPES: Final[tuple[DeliveryType, ...]] = ("pull_request", "merge", "artifact", "none")

_MAX_ID_CHARS: Final = 128
_MAX_ACTION_CHARS: Final = 128
_MAX_PATTERN_CHARS: Final = 4096
_MAX_BUDGET: Final = 2**53 - 1
_ID: Final = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*", re.ASCII)
_ACTION_SOURCE: Final = r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$"
_ACTION: Final = re.compile(r"[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)*", re.ASCII)
_EFFECT_CHOICES: Final = ", ".join(EFFECTS)


# ------------------------------------------------------------------ records


class TaskBudget(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Hard limits for a builder or agent run (the server takes min(request, manifest)).

    Attributes:
        max_model_tokens: Positive limit on model tokens, or ``None``.
        max_tool_calls: Positive limit on tool calls, or ``None``.
    """

    max_model_tokens: int | None = None
    max_tool_calls: int | None = None


class Delivery(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """How the task's result is delivered.

    Attributes:
        type: ``pull_request`` (the default), ``merge``, ``artifact`` or ``none``.
    """

    type: DeliveryType = "pull_request"


class TaskManifest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A decoded, validated, deeply immutable task manifest (exit-gate.md §2.2).

    Attributes:
        id: Kebab-case identity; fixes the file name, the branch and the report names.
        title: Human title.
        goal: Prose definition of done.
        acceptance: Testable criteria (at least one).
        allowed_paths: Repo-relative POSIX globs of the files the task may change.
        permissions: The read-only rule map for ``harness_kernel.policy``.
        budget: Optional hard limits.
        delivery: Delivery mode.
    """

    id: str
    title: str
    goal: str
    acceptance: tuple[str, ...]
    allowed_paths: tuple[str, ...]
    permissions: Mapping[str, Rule]
    budget: TaskBudget | None = None
    delivery: Delivery


class ManifestIssue(msgspec.Struct, frozen=True):
    """One problem in a manifest.

    Attributes:
        path: Keys and list indices joined with dots (``allowed_paths.2``); ``<root>`` is
            the top level and ``<yaml>`` a syntax error.
        message: What is wrong.
    """

    path: str
    message: str


class ManifestParseError(HarnessError):
    """A manifest is not valid; ``issues`` lists every problem found.

    ``str(error)`` is ``invalid task manifest: <path> <message>; …``.

    Attributes:
        issues: Every issue, in the order found.
    """

    issues: list[ManifestIssue]

    def __init__(self, issues: Sequence[ManifestIssue]) -> None:
        self.issues = list(issues)
        listed = "; ".join(f"{issue.path} {issue.message}" for issue in self.issues)
        super().__init__(MANIFEST_INVALID, f"invalid task manifest: {listed}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.issues,))


# ------------------------------------------------------------------ schema checks

_Check: TypeAlias = "Callable[[_Checker, object, str], object]"


@final
class _Checker:
    """Walks a decoded document against the schema, collecting every issue.

    Each ``check_*`` method returns the plain value to hand to msgspec, or ``None`` when
    the value is invalid (its issues are recorded). Containers are entered only where the
    schema has them, so the walk is shallow whatever the input's depth.
    """

    def __init__(self) -> None:
        self.issues: list[ManifestIssue] = []

    def issue(self, path: str, message: str) -> None:
        self.issues.append(ManifestIssue(path, message))

    def type_error(self, path: str, expected: str, value: object) -> None:
        self.issue(path, f"expected {expected}, got {describe_kind(value)}")

    def entries(self, value: object, path: str) -> list[tuple[str, object]] | None:
        """The entries of a mapping with ``str`` keys; other keys are reported and skipped."""
        if not is_mapping(value):
            self.type_error(path, "a mapping", value)
            return None
        entries: list[tuple[str, object]] = []
        for key, item in list(value.items()):
            if is_str(key):
                entries.append((key, item))
            else:
                self.issue(path, f"keys must be strings, got {describe_kind(key)}")
        return entries

    def text(self, value: object, path: str, *, non_empty: bool = True) -> str | None:
        if not is_str(value):
            self.type_error(path, "a string", value)
            return None
        if non_empty and not value:
            self.issue(path, "must be a non-empty string")
            return None
        if has_lone_surrogate(value):
            self.issue(path, "must not contain lone surrogates")
            return None
        return value

    def items(self, value: object, path: str) -> list[tuple[str, object]] | None:
        """The items of a non-empty list, each with its path."""
        if not is_exact_array(value):
            self.type_error(path, "a list", value)
            return None
        if not value:
            self.issue(path, "must contain at least one item")
            return None
        return [(join_path(path, str(index)), item) for index, item in enumerate(value)]

    # -------------------------------------------------------------- fields

    def check_id(self, value: object, path: str) -> object:
        text = self.text(value, path, non_empty=False)
        if text is None:
            return None
        if len(text) > _MAX_ID_CHARS:
            self.issue(path, f"must be at most {_MAX_ID_CHARS} characters")
            return None
        if _ID.fullmatch(text) is None:
            self.issue(path, "id must be a kebab-case identifier")
            return None
        return text

    def check_text(self, value: object, path: str) -> object:
        return self.text(value, path)

    def check_acceptance(self, value: object, path: str) -> object:
        items = self.items(value, path)
        if items is None:
            return None
        checked = [self.text(item, item_path) for item_path, item in items]
        return None if None in checked else checked

    def check_allowed_paths(self, value: object, path: str) -> object:
        items = self.items(value, path)
        if items is None:
            return None
        checked: list[str | None] = []
        for item_path, item in items:
            text = self.text(item, item_path)
            if text is not None and not self.allowed_path_ok(text, item_path):
                text = None
            checked.append(text)
        return None if None in checked else checked

    def allowed_path_ok(self, text: str, path: str) -> bool:
        before = len(self.issues)
        if text.startswith("/"):
            self.issue(path, "must be repo-relative (no leading /)")
        if ".." in text.split("/"):
            self.issue(path, "must not contain a .. segment")
        if "\\" in text:
            self.issue(path, "must not contain a backslash")
        if "\0" in text:
            self.issue(path, "must not contain NUL")
        return len(self.issues) == before

    def check_permissions(self, value: object, path: str) -> object:
        entries = self.entries(value, path)
        if entries is None:
            return None
        checked: dict[str, Rule] = {}
        valid = True
        for action, rule in entries:
            action_path = join_path(path, action)
            action_ok = self.action_ok(action, action_path)
            rule_value = self.check_rule(rule, action_path)
            if isinstance(rule_value, Mapping):
                rule_value = self.check_subject_rule(action, rule_value, action_path)
            if action_ok and rule_value is not None:
                checked[action] = rule_value
            else:
                valid = False
        return checked if valid else None

    def action_ok(self, action: str, path: str) -> bool:
        if len(action) > _MAX_ACTION_CHARS:
            self.issue(path, f"action must be at most {_MAX_ACTION_CHARS} characters")
            return False
        if _ACTION.fullmatch(action) is None:
            self.issue(path, f"action must match {_ACTION_SOURCE}")
            return False
        if action in RESERVED_ACTIONS:
            self.issue(path, f'action "{action}" is reserved for the exit gate')
            return False
        return True

    def check_rule(self, rule: object, path: str) -> Rule | None:
        if is_refused(rule):
            return None
        if is_effect(rule):
            return rule
        if is_str(rule):
            self.issue(path, f'effect must be one of {_EFFECT_CHOICES}, got "{rule}"')
            return None
        if not is_mapping(rule):
            expected = f"one of {_EFFECT_CHOICES} or a mapping of subject patterns to effects"
            self.type_error(path, expected, rule)
            return None
        entries = self.entries(rule, path)
        if entries is None:
            return None
        subjects: dict[str, Effect] = {}
        valid = True
        for pattern, effect in entries:
            pattern_path = join_path(path, pattern)
            if not self.pattern_ok(pattern, path) or is_refused(effect):
                valid = False
            elif is_effect(effect):
                subjects[pattern] = effect
            else:
                valid = False
                shown = f'"{effect}"' if is_str(effect) else describe_kind(effect)
                self.issue(pattern_path, f"effect must be one of {_EFFECT_CHOICES}, got {shown}")
        return subjects if valid else None

    def check_subject_rule(self, action: str, rule: Mapping[str, Effect], path: str) -> Rule | None:
        """What the action's subject allows its patterns to be (decision 041)."""
        if action in _NO_SUBJECT_ACTIONS:
            self.issue(path, f"{action} takes no subject; use allow, ask or deny")
            return None
        if action not in _PATH_SUBJECT_ACTIONS:
            # process.exec patterns are command globs: any text is a valid one.
            return rule
        valid = True
        for pattern in rule:
            # Problems of the pattern are reported at the action, as in pattern_ok.
            if pattern.startswith("/"):
                self.issue(
                    path, f'{action} pattern "{pattern}" must be a workspace-relative path (no leading /)'
                )
                valid = False
            elif ".." in pattern.split("/"):
                self.issue(path, f'{action} pattern "{pattern}" must not contain a .. segment')
                valid = False
        return rule if valid else None

    def pattern_ok(self, pattern: str, path: str) -> bool:
        # Problems of the pattern itself are reported at the action: an empty or
        # 4097-character key would make a poor path.
        if not pattern:
            self.issue(path, "subject patterns must be non-empty")
            return False
        if len(pattern) > _MAX_PATTERN_CHARS:
            self.issue(path, f"subject patterns must be at most {_MAX_PATTERN_CHARS} characters")
            return False
        if has_lone_surrogate(pattern):
            self.issue(path, "subject patterns must not contain lone surrogates")
            return False
        return True

    def check_budget(self, value: object, path: str) -> object:
        return self.record(value, path, _BUDGET_FIELDS)

    def check_limit(self, value: object, path: str) -> object:
        if type(value) is not int:
            self.type_error(path, "a positive integer", value)
            return None
        if value < 1:
            self.issue(path, "must be a positive integer")
            return None
        if value > _MAX_BUDGET:
            self.issue(path, f"must be at most {_MAX_BUDGET}")
            return None
        return value

    def check_delivery(self, value: object, path: str) -> object:
        return self.record(value, path, _DELIVERY_FIELDS)

    def check_delivery_type(self, value: object, path: str) -> object:
        if is_str(value) and value in DELIVERY_TYPES:
            return value
        shown = f'"{value}"' if is_str(value) else describe_kind(value)
        self.issue(path, f"must be one of {', '.join(DELIVERY_TYPES)}, got {shown}")
        return None

    # -------------------------------------------------------------- records

    def record(
        self,
        value: object,
        path: str,
        fields: Mapping[str, _Check],
        required: Sequence[str] = (),
    ) -> dict[str, object] | None:
        """Check a strict mapping: known fields only, each checked, required ones present."""
        if is_refused(value):
            return None
        entries = self.entries(value, path)
        if entries is None:
            return None
        checked: dict[str, object] = {}
        valid = True
        for key, item in entries:
            field_path = join_path(path, key)
            check = fields.get(key)
            if check is None:
                self.issue(field_path, "unknown field")
                valid = False
                continue
            result = None if is_refused(item) else check(self, item, field_path)
            if result is None:
                valid = False
            else:
                checked[key] = result
        present = {key for key, _ in entries}
        for name in required:
            if name not in present:
                self.issue(path, f'missing required field "{name}"')
                valid = False
        return checked if valid else None


_MANIFEST_FIELDS: Final[Mapping[str, _Check]] = MappingProxyType(
    {
        "id": _Checker.check_id,
        "title": _Checker.check_text,
        "goal": _Checker.check_text,
        "acceptance": _Checker.check_acceptance,
        "allowed_paths": _Checker.check_allowed_paths,
        "permissions": _Checker.check_permissions,
        "budget": _Checker.check_budget,
        "delivery": _Checker.check_delivery,
    }
)
_BUDGET_FIELDS: Final[Mapping[str, _Check]] = MappingProxyType(
    {"max_model_tokens": _Checker.check_limit, "max_tool_calls": _Checker.check_limit}
)
_DELIVERY_FIELDS: Final[Mapping[str, _Check]] = MappingProxyType({"type": _Checker.check_delivery_type})
_REQUIRED_FIELDS: Final = ("id", "title", "goal", "acceptance", "allowed_paths", "permissions", "delivery")


def _freeze_permissions(permissions: Mapping[str, Rule]) -> Mapping[str, Rule]:
    return MappingProxyType(
        {
            action: MappingProxyType(dict(rule.items())) if isinstance(rule, Mapping) else rule
            for action, rule in permissions.items()
        }
    )


def _convert(checker: _Checker, document: object) -> TaskManifest:
    plain = checker.record(document, ROOT, _MANIFEST_FIELDS, _REQUIRED_FIELDS)
    if plain is None or checker.issues:
        raise ManifestParseError(checker.issues or [ManifestIssue(ROOT, "manifest is not valid")])
    try:
        manifest = msgspec.convert(plain, TaskManifest, strict=True)
    except msgspec.ValidationError as error:
        # The checks above are stricter than the schema; this is a safety net only.
        raise ManifestParseError([ManifestIssue(ROOT, str(error))]) from None
    return msgspec.structs.replace(manifest, permissions=_freeze_permissions(manifest.permissions))


# ------------------------------------------------------------------ public API


def decode_task_manifest(doc: object) -> TaskManifest:
    """Validate an already decoded manifest (exact ``dict``, ``list``, ``str``, ``int``…).

    Raises:
        ManifestParseError: with every issue found.
    """
    return _convert(_Checker(), doc)


def load_task_manifest(yaml_text: str | bytes) -> TaskManifest:
    """Parse and validate one manifest from its YAML text.

    The text is UTF-8 (``bytes`` are decoded strictly), at most 256 KiB, and exactly one
    YAML document. Duplicate keys, anchors, aliases, merge keys and explicit tags are
    refused at any depth, and YAML's implicit typing is never coerced back
    (``title: yes`` is a type error).

    Raises:
        ManifestParseError: with every issue found.
    """
    if type(yaml_text) is bytes:
        if len(yaml_text) > MAX_MANIFEST_BYTES:
            raise ManifestParseError([_too_large()])
        try:
            text = yaml_text.decode("utf-8")
        except UnicodeDecodeError as error:
            issue = ManifestIssue(SYNTAX, f"invalid YAML: not UTF-8 ({error.reason})")
            raise ManifestParseError([issue]) from None
    elif type(yaml_text) is str:
        text = yaml_text
        if len(text) > MAX_MANIFEST_BYTES:
            raise ManifestParseError([_too_large()])
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            issue = ManifestIssue(SYNTAX, "invalid YAML: not UTF-8 (lone surrogate)")
            raise ManifestParseError([issue]) from None
        if size > MAX_MANIFEST_BYTES:
            raise ManifestParseError([_too_large()])
    else:
        raise ManifestParseError(
            [ManifestIssue(ROOT, f"manifest text must be str or bytes, got {describe_kind(yaml_text)}")]
        )
    document = read_yaml_document(text)
    checker = _Checker()
    for path, message in document.issues:
        checker.issue(path, message)
    if not document.complete:
        raise ManifestParseError(checker.issues)
    return _convert(checker, document.value)


def _too_large() -> ManifestIssue:
    return ManifestIssue(ROOT, f"manifest exceeds {MAX_MANIFEST_BYTES} bytes of UTF-8")


def manifest_permissions(manifest: TaskManifest) -> PermissionMap:
    """The manifest's rule map, read-only, ready for ``compile_rules`` or ``RulePermissionController``.

    Raises:
        TypeError: ``manifest`` is not a :class:`TaskManifest`.
    """
    if type(manifest) is not TaskManifest:
        raise TypeError("manifest must be a TaskManifest")
    return manifest.permissions
