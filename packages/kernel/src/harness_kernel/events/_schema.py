"""The payload validator: compiled from the Struct annotations, it reports every issue.

msgspec stops at the first problem, and the spec wants all of them with dotted wire paths,
so validation is a pass of its own over the decoded JSON object: each field is checked by a
checker compiled once from its annotation (``Annotated[..., Meta(...)]``, ``Literal``, nested
Structs, the JSON marker), then the rules that span fields run, and only a clean payload is
built into its Struct. Inputs here have already passed the JSON gate (exact JSON types, no
lone surrogates), so checkers only look at JSON values.
"""

from __future__ import annotations

import math
import re
import types
from collections.abc import Callable, Mapping
from typing import Annotated, Final, Literal, TypeGuard, Union, final, get_args, get_origin

import msgspec
from msgspec import UnsetType

from harness_kernel._json import MAX_SAFE_INTEGER, JsonDataError, freeze_json, is_json_object, json_type_name
from harness_kernel.events._errors import SchemaIssue
from harness_kernel.events._model import (
    EVENT_PAYLOADS,
    TIMESTAMP_FIELD,
    AssistantMessageCompletedData,
    AuditExportedData,
    BarePolicyDecisionData,
    ContextCompactedData,
    Event,
    EventPayload,
    EventType,
    ModelRequestData,
    RunState,
    RuntimeCheckpointData,
    RuntimePolicyDecisionData,
    RunUpdatedData,
    TaskPolicyDecisionData,
    ToolMessageCompletedData,
    TurnCompletedData,
    UserMessageCompletedData,
)

__all__ = ["INVALID", "Checker", "PayloadSchema", "envelope_checkers", "join_path", "payload_validator"]


@final
class _Invalid:
    """The result of a check that failed (its issues are already recorded)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "INVALID"


INVALID: Final = _Invalid()

Checker = Callable[[object, str, list[SchemaIssue]], object]
"""``check(value, path, issues)``: the value to store, or ``INVALID`` after adding issues."""

Refinement = Callable[[Mapping[str, object], Mapping[str, object], str, list[SchemaIssue]], None]
"""``refine(raw, valid, path, issues)`` for rules across fields; both keyed by wire name."""


def join_path(path: str, key: str) -> str:
    """``data`` + ``usage`` → ``data.usage``; the envelope's own keys have no prefix."""
    return f"{path}.{key}" if path else key


# ------------------------------------------------------------------ scalar checkers
def _describe_literal(value: object) -> str:
    return f'"{value}"' if type(value) is str else repr(value)


def _literal_checker(values: tuple[object, ...]) -> Checker:
    allowed = frozenset((type(value), value) for value in values)
    if len(values) == 1:
        expected = f"must be {_describe_literal(values[0])}"
    else:
        expected = "must be one of " + ", ".join(str(value) for value in values)

    def check(value: object, path: str, issues: list[SchemaIssue]) -> object:
        # Only JSON scalars are hashed; containers cannot be literals anyway.
        if type(value) in (str, int, bool) and (type(value), value) in allowed:
            return value
        issues.append((path, expected))
        return INVALID

    return check


def _string_checker(meta: msgspec.Meta | None) -> Checker:
    min_length = meta.min_length if meta is not None else None
    max_length = meta.max_length if meta is not None else None
    pattern = re.compile(meta.pattern, re.ASCII) if meta is not None and meta.pattern else None
    description = meta.description if meta is not None and meta.description else "well-formed"
    is_timestamp = meta is not None and meta.extra is not None and meta.extra.get("kind") == TIMESTAMP_FIELD

    def check(value: object, path: str, issues: list[SchemaIssue]) -> object:
        if type(value) is not str:
            issues.append((path, f"must be a string (got {json_type_name(value)})"))
            return INVALID
        assert isinstance(value, str)
        length = len(value)
        failed = False
        if min_length is not None and length < min_length:
            too_short = (
                "must not be empty" if min_length == 1 else f"must be at least {min_length} characters"
            )
            issues.append((path, too_short))
            failed = True
        if max_length is not None and length > max_length:
            issues.append((path, f"must be at most {max_length} characters"))
            failed = True
        if pattern is not None and pattern.fullmatch(value) is None:
            issues.append((path, f"must be {description}"))
            failed = True
        elif is_timestamp and not is_calendar_valid(value):
            issues.append((path, "must be a valid calendar date and time"))
            failed = True
        return INVALID if failed else value

    return check


def _int_range_issue(value: int, meta: msgspec.Meta | None) -> str | None:
    if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return "must be a safe integer (at most 2**53-1 in magnitude)"
    if meta is not None:
        if meta.ge is not None and value < meta.ge:
            return f"must be at least {meta.ge}"
        if meta.le is not None and value > meta.le:
            return f"must be at most {meta.le}"
    return None


def _int_checker(meta: msgspec.Meta | None) -> Checker:
    def check(value: object, path: str, issues: list[SchemaIssue]) -> object:
        if type(value) is not int:
            issues.append((path, f"must be an integer (got {json_type_name(value)})"))
            return INVALID
        assert isinstance(value, int)
        problem = _int_range_issue(value, meta)
        if problem is not None:
            issues.append((path, problem))
            return INVALID
        return value

    return check


def _number_checker(int_meta: msgspec.Meta | None, float_meta: msgspec.Meta | None) -> Checker:
    """Finite ``int`` or ``float``; the value keeps its type so re-encoding is byte-stable."""

    def check(value: object, path: str, issues: list[SchemaIssue]) -> object:
        if type(value) is int:
            assert isinstance(value, int)
            problem = _int_range_issue(value, int_meta)
        elif type(value) is float:
            assert isinstance(value, float)
            if not math.isfinite(value):
                problem = "must be a finite number"
            elif float_meta is not None and float_meta.ge is not None and value < float_meta.ge:
                problem = f"must be at least {float_meta.ge}"
            else:
                problem = None
        else:
            problem = f"must be a number (got {json_type_name(value)})"
        if problem is not None:
            issues.append((path, problem))
            return INVALID
        return value

    return check


def _check_bool(value: object, path: str, issues: list[SchemaIssue]) -> object:
    if type(value) is bool:
        return value
    issues.append((path, f"must be a boolean (got {json_type_name(value)})"))
    return INVALID


def _check_json(value: object, path: str, issues: list[SchemaIssue]) -> object:
    try:
        return freeze_json(value)
    except JsonDataError as error:
        issues.append((path, f"must be JSON data ({error.reason} at {error.location})"))
        return INVALID


_DAYS_IN_MONTH: Final = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def is_calendar_valid(text: str) -> bool:
    """Whether a timestamp that matches the pattern names a real date, time and offset.

    Years 0001-9999 (the range of ``datetime``); no leap seconds; offsets up to ±23:59.
    """
    year, month, day = int(text[0:4]), int(text[5:7]), int(text[8:10])
    hour, minute, second = int(text[11:13]), int(text[14:16]), int(text[17:19])
    if year < 1 or not 1 <= month <= 12 or hour > 23 or minute > 59 or second > 59:
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = 29 if month == 2 and leap else _DAYS_IN_MONTH[month - 1]
    if not 1 <= day <= days:
        return False
    if text.endswith("Z"):
        return True
    return int(text[-5:-3]) <= 23 and int(text[-2:]) <= 59


# ------------------------------------------------------------------ compiling annotations
def _meta_of(extras: tuple[object, ...]) -> msgspec.Meta | None:
    for extra in extras:
        if isinstance(extra, msgspec.Meta):
            return extra
    return None


def _compile(annotation: object) -> Checker:
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *extras = get_args(annotation)
        meta = _meta_of(tuple(extras))
        if meta is not None and meta.extra is not None and meta.extra.get("kind") == "json":
            return _check_json
        if base is str:
            return _string_checker(meta)
        if base is int:
            return _int_checker(meta)
        raise TypeError(f"no schema checker for {annotation!r}")
    if origin is Union or origin is types.UnionType:
        members = get_args(annotation)
        bases = tuple(
            get_args(member)[0] if get_origin(member) is Annotated else member for member in members
        )
        if bases == (int, float):
            int_meta, float_meta = (_meta_of(tuple(get_args(member)[1:])) for member in members)
            return _number_checker(int_meta, float_meta)
        raise TypeError(f"no schema checker for {annotation!r}")
    if origin is Literal:
        return _literal_checker(get_args(annotation))
    if annotation is str:
        return _string_checker(None)
    if annotation is bool:
        return _check_bool
    if isinstance(annotation, type) and issubclass(annotation, EventPayload):
        return PayloadSchema.of(annotation).validate
    raise TypeError(f"no schema checker for {annotation!r}")


def _without_unset(annotation: object) -> tuple[object, bool]:
    """The annotation without ``UnsetType``, and whether ``UnsetType`` was there."""
    if get_origin(annotation) is Union or get_origin(annotation) is types.UnionType:
        members = get_args(annotation)
        kept = tuple(member for member in members if member is not UnsetType)
        if len(kept) != len(members):
            return (kept[0] if len(kept) == 1 else Union[kept]), True  # noqa: UP007 - runtime union of types
    return annotation, False


@final
class _Field:
    __slots__ = ("attribute", "check", "data_path", "required", "wire")

    def __init__(self, attribute: str, wire: str, required: bool, check: Checker) -> None:
        self.attribute = attribute
        self.wire = wire
        self.required = required
        self.check = check
        # The path of this field in a top-level payload, built once instead of per check.
        self.data_path = join_path("data", wire)

    def path_in(self, path: str) -> str:
        return self.data_path if path == "data" else join_path(path, self.wire)


@final
class PayloadSchema:
    """The compiled schema of one payload Struct (or nested record)."""

    __slots__ = ("cls", "fields", "label", "refine", "wire_names")

    _cache: Final[dict[type[EventPayload], PayloadSchema]] = {}

    def __init__(self, cls: type[EventPayload], label: str, refine: Refinement | None) -> None:
        self.cls = cls
        self.label = label
        self.refine = refine
        fields: list[_Field] = []
        for info in msgspec.structs.fields(cls):
            annotation, optional = _without_unset(info.type)
            fields.append(_Field(info.name, info.encode_name, not optional, _compile(annotation)))
        self.fields: tuple[_Field, ...] = tuple(fields)
        self.wire_names: frozenset[str] = frozenset(field.wire for field in fields)

    @classmethod
    def of(cls, payload: type[EventPayload], label: str | None = None) -> PayloadSchema:
        """The cached schema of ``payload`` (compiled on first use)."""
        schema = cls._cache.get(payload)
        if schema is None:
            schema = cls(payload, label or payload.__name__, _REFINEMENTS.get(payload))
            cls._cache[payload] = schema
        return schema

    def validate(self, value: object, path: str, issues: list[SchemaIssue]) -> object:
        """The built Struct, or ``INVALID`` after adding every issue found to ``issues``."""
        if not _is_object_or_report(value, path, issues):
            return INVALID
        raw = value
        before = len(issues)
        valid: dict[str, object] = {}
        arguments: dict[str, object] = {}
        for field in self.fields:
            wire = field.wire
            if wire in raw:
                checked = field.check(raw[wire], field.path_in(path), issues)
                if checked is not INVALID:
                    valid[wire] = checked
                    arguments[field.attribute] = checked
            elif field.required:
                issues.append((field.path_in(path), "is required"))
        if len(valid) != len(raw):
            for key in raw:
                if key not in self.wire_names:
                    issues.append((join_path(path, key), f"is not allowed in {self.label}"))
        if self.refine is not None:
            self.refine(raw, valid, path, issues)
        if len(issues) > before:
            return INVALID
        return self.cls(**arguments)


# ------------------------------------------------------------------ rules across fields
def _both_or_neither(
    raw: Mapping[str, object], first: str, second: str, path: str, issues: list[SchemaIssue]
) -> None:
    if (first in raw) != (second in raw):
        missing, present = (second, first) if first in raw else (first, second)
        issues.append((join_path(path, missing), f"is required together with {present}"))


def _refine_revision_pair(
    raw: Mapping[str, object], valid: Mapping[str, object], path: str, issues: list[SchemaIssue]
) -> None:
    _both_or_neither(raw, "stateVersion", "messageRevision", path, issues)


def _refine_model_request(
    raw: Mapping[str, object], valid: Mapping[str, object], path: str, issues: list[SchemaIssue]
) -> None:
    _both_or_neither(raw, "contextVersion", "messageRevision", path, issues)


def _less_than(valid: Mapping[str, object], smaller: str, larger: str) -> bool:
    low, high = valid.get(smaller), valid.get(larger)
    if isinstance(low, int) and isinstance(high, int):
        return low < high
    return True


def _refine_context_compacted(
    raw: Mapping[str, object], valid: Mapping[str, object], path: str, issues: list[SchemaIssue]
) -> None:
    if not _less_than(valid, "afterMessages", "beforeMessages"):
        issues.append((join_path(path, "afterMessages"), "must be less than beforeMessages"))
    _both_or_neither(raw, "beforeTokens", "afterTokens", path, issues)
    if not _less_than(valid, "afterTokens", "beforeTokens"):
        issues.append((join_path(path, "afterTokens"), "must be less than beforeTokens"))


def _refine_runtime_checkpoint(
    raw: Mapping[str, object], valid: Mapping[str, object], path: str, issues: list[SchemaIssue]
) -> None:
    boundary = valid.get("boundary")
    if boundary in ("request", "response") and "requestId" not in raw:
        issues.append((join_path(path, "requestId"), f"is required at a {boundary} boundary"))
    if boundary == "turn" and "requestId" in raw:
        issues.append((join_path(path, "requestId"), "is not allowed at a turn boundary"))


def _refine_audit_exported(
    raw: Mapping[str, object], valid: Mapping[str, object], path: str, issues: list[SchemaIssue]
) -> None:
    start, end = valid.get("fromSeq"), valid.get("toSeq")
    if isinstance(start, int) and isinstance(end, int) and end < start:
        issues.append((join_path(path, "toSeq"), "must be at least fromSeq"))


_RUN_STATES: Final = get_args(RunState)
RUN_TRANSITIONS: Final[Mapping[str, frozenset[tuple[str, str]]]] = {
    "started": frozenset({("leased", "running")}),
    "heartbeat": frozenset({("leased", "leased"), ("running", "running")}),
    "completed": frozenset({("running", "passed"), ("running", "failed"), ("running", "blocked")}),
    "canceled": frozenset((state, "canceled") for state in _RUN_STATES),
    "lease_expired_requeued": frozenset({("leased", "queued")}),
    "lease_expired_indeterminate": frozenset({("running", "indeterminate")}),
    "reconciled": frozenset({("indeterminate", "queued"), ("indeterminate", "canceled")}),
}
"""``run.updated``: change → the allowed ``(previousStatus, status)`` pairs."""

_LEASED_STATES: Final = frozenset({"leased", "running"})


def _refine_run_updated(
    raw: Mapping[str, object], valid: Mapping[str, object], path: str, issues: list[SchemaIssue]
) -> None:
    change, status, previous = valid.get("change"), valid.get("status"), valid.get("previousStatus")
    if type(change) is str and type(status) is str and type(previous) is str:
        assert isinstance(change, str)
        assert isinstance(status, str)
        assert isinstance(previous, str)
        if (previous, status) not in RUN_TRANSITIONS[change]:
            issues.append((join_path(path, "change"), f"does not allow {previous} -> {status}"))
    if type(status) is not str:
        return
    if status in _LEASED_STATES:
        for key in ("workerId", "leaseExpiresAt"):
            if key not in raw:
                issues.append((join_path(path, key), f"is required when status is {status}"))
        if valid.get("fencingToken") == 0:
            issues.append((join_path(path, "fencingToken"), f"must be at least 1 when status is {status}"))
    else:
        for key in ("workerId", "leaseExpiresAt"):
            if key in raw:
                issues.append((join_path(path, key), f"is not allowed when status is {status}"))


_REFINEMENTS: Final[dict[type[EventPayload], Refinement]] = {
    UserMessageCompletedData: _refine_revision_pair,
    AssistantMessageCompletedData: _refine_revision_pair,
    ToolMessageCompletedData: _refine_revision_pair,
    TurnCompletedData: _refine_revision_pair,
    ModelRequestData: _refine_model_request,
    ContextCompactedData: _refine_context_compacted,
    RuntimeCheckpointData: _refine_runtime_checkpoint,
    AuditExportedData: _refine_audit_exported,
    RunUpdatedData: _refine_run_updated,
}


# ------------------------------------------------------------------ variants and the registry
_MESSAGE_ROLES: Final = {
    "user": PayloadSchema.of(UserMessageCompletedData, "message.completed (role user)"),
    "assistant": PayloadSchema.of(AssistantMessageCompletedData, "message.completed (role assistant)"),
    "tool": PayloadSchema.of(ToolMessageCompletedData, "message.completed (role tool)"),
}
_RUNTIME_DECISION: Final = PayloadSchema.of(RuntimePolicyDecisionData, "policy.decision (runtime)")
_TASK_DECISION: Final = PayloadSchema.of(TaskPolicyDecisionData, "policy.decision (task)")
_BARE_DECISION: Final = PayloadSchema.of(BarePolicyDecisionData, "policy.decision (bare)")


def _is_object_or_report(value: object, path: str, issues: list[SchemaIssue]) -> TypeGuard[dict[str, object]]:
    if is_json_object(value):
        return True
    issues.append((path, f"must be an object (got {json_type_name(value)})"))
    return False


def _validate_message_completed(value: object, path: str, issues: list[SchemaIssue]) -> object:
    if not _is_object_or_report(value, path, issues):
        return INVALID
    role = value.get("role")
    schema = _MESSAGE_ROLES.get(role) if isinstance(role, str) else None
    if schema is None:
        message = "is required" if "role" not in value else "must be one of user, assistant, tool"
        issues.append((join_path(path, "role"), message))
        return INVALID
    return schema.validate(value, path, issues)


def _validate_policy_decision(value: object, path: str, issues: list[SchemaIssue]) -> object:
    """Runtime if a turn or call is named, task if a task, session or run is, else bare."""
    if not _is_object_or_report(value, path, issues):
        return INVALID
    if "turnId" in value or "callId" in value:
        schema = _RUNTIME_DECISION
    elif "taskId" in value or "sessionId" in value or "runId" in value:
        schema = _TASK_DECISION
    else:
        schema = _BARE_DECISION
    return schema.validate(value, path, issues)


def _registry_validator(event_type: EventType) -> Checker:
    if event_type == "message.completed":
        return _validate_message_completed
    if event_type == "policy.decision":
        return _validate_policy_decision
    entry = EVENT_PAYLOADS[event_type]
    assert not isinstance(entry, tuple)
    return PayloadSchema.of(entry, event_type).validate


_VALIDATORS: Final[dict[str, Checker]] = {
    event_type: _registry_validator(event_type) for event_type in EVENT_PAYLOADS
}


def payload_validator(event_type: EventType) -> Checker:
    """The ``data`` validator of a known event type (variants are chosen inside)."""
    return _VALIDATORS[event_type]


def _envelope_checkers() -> dict[str, tuple[Checker, bool]]:
    checkers: dict[str, tuple[Checker, bool]] = {}
    for info in msgspec.structs.fields(Event):
        if info.encode_name in ("eventId", "at", "actor"):
            annotation, optional = _without_unset(info.type)
            checkers[info.encode_name] = (_compile(annotation), not optional)
    return checkers


_ENVELOPE: Final = _envelope_checkers()


def envelope_checkers() -> Mapping[str, tuple[Checker, bool]]:
    """Checkers of ``eventId``, ``at`` and ``actor``, with whether each is required."""
    return _ENVELOPE
