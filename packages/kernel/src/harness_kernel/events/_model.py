"""The event envelope and the 28 payload Structs of the catalogue (spec §2.1, §2.3, §2.4).

The annotations are the schema: field order is the wire key order, ``msgspec.Meta`` carries
the per-field constraints, and ``harness_kernel.events._schema`` compiles them into the
validator that collects every issue. Rules that span fields (rev-pairs, ``run.updated``
transitions, variant selection) live there too. msgspec does not validate in ``__init__``:
build events with ``create_event`` or decode them, never trust a hand-built instance.
"""

# No ``from __future__ import annotations``: msgspec and the schema compiler read these
# annotations at runtime, and fields named ``type`` or ``bytes`` must not shadow anything.

from types import MappingProxyType
from typing import Annotated, Final, Literal, TypeAlias, get_args

import msgspec
from msgspec import UNSET, Meta, UnsetType

from harness_kernel._json import MAX_SAFE_INTEGER, JsonValue

__all__ = [
    "CURRENT_EVENT_VERSION",
    "EVENT_PAYLOADS",
    "EVENT_TYPES",
    "SUPPORTED_EVENT_VERSIONS",
    "AgentStartedData",
    "AgentStoppedData",
    "ArtifactRegisteredData",
    "AssistantMessageCompletedData",
    "AuditExportedData",
    "BarePolicyDecisionData",
    "BudgetWarningData",
    "ContextAccountedData",
    "ContextCheckpointData",
    "ContextCompactedData",
    "ErrorData",
    "Event",
    "EventData",
    "EventPayload",
    "EventType",
    "EventUsage",
    "MessageCompletedData",
    "MessageDeltaData",
    "ModelRequestData",
    "ModelResponseData",
    "PermissionRequestedData",
    "PermissionResolvedData",
    "PolicyDecisionData",
    "RunLeasedData",
    "RunRecordedData",
    "RunScheduledData",
    "RunUpdatedData",
    "RuntimeCheckpointData",
    "RuntimePolicyDecisionData",
    "SandboxStartedData",
    "SandboxStoppedData",
    "SessionCreatedData",
    "SessionRestoredData",
    "SteeringAppliedData",
    "SteeringQueuedData",
    "TaskPolicyDecisionData",
    "TaskUpdatedData",
    "ToolCallData",
    "ToolMessageCompletedData",
    "ToolResultData",
    "ToolResultErrorData",
    "TurnCompletedData",
    "TurnResumedData",
    "TurnStartedData",
    "UserMessageCompletedData",
]

CURRENT_EVENT_VERSION: Final = 1
SUPPORTED_EVENT_VERSIONS: Final[tuple[int, ...]] = (1,)

KIB: Final = 1_024
MIB: Final = 1_048_576

JSON_FIELD: Final = Meta(extra={"kind": "json"})
"""Marks a field holding arbitrary (frozen) JSON data."""
TIMESTAMP_FIELD: Final = "timestamp"

TIMESTAMP_PATTERN: Final = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$"
)

# ------------------------------------------------------------------ field vocabulary
Id: TypeAlias = Annotated[str, Meta(min_length=1)]
Count: TypeAlias = Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)]
PositiveCount: TypeAlias = Annotated[int, Meta(ge=1, le=MAX_SAFE_INTEGER)]
Cursor: TypeAlias = Annotated[int, Meta(ge=-1, le=MAX_SAFE_INTEGER)]
SafeInt: TypeAlias = Annotated[int, Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
Number: TypeAlias = Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)] | Annotated[float, Meta(ge=0)]
Timestamp: TypeAlias = Annotated[
    str,
    Meta(
        pattern=TIMESTAMP_PATTERN,
        description="a timestamp YYYY-MM-DDTHH:MM:SS[.fraction] then Z or ±HH:MM",
        extra={"kind": TIMESTAMP_FIELD},
    ),
]
Sha256: TypeAlias = Annotated[
    str, Meta(pattern=r"^[0-9a-f]{64}$", description="64 lowercase hexadecimal characters")
]
Json: TypeAlias = Annotated[JsonValue, JSON_FIELD]

FinishReason: TypeAlias = Literal["stop", "tool_calls", "length", "error"]
AgentStatus: TypeAlias = Literal["completed", "failed", "canceled", "budget_exceeded"]
RunState: TypeAlias = Literal[
    "queued", "leased", "running", "passed", "failed", "blocked", "canceled", "indeterminate"
]
RunChange: TypeAlias = Literal[
    "started",
    "heartbeat",
    "completed",
    "canceled",
    "lease_expired_requeued",
    "lease_expired_indeterminate",
    "reconciled",
]
PermissionScope: TypeAlias = Literal["once", "run"]


class EventPayload(
    msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True, omit_defaults=True
):
    """Base of every payload Struct (and nested record) of the catalogue."""


class EventUsage(EventPayload, frozen=True, kw_only=True):
    """Token usage: ``{promptTokens, completionTokens, totalTokens}``."""

    prompt_tokens: Count
    completion_tokens: Count
    total_tokens: Count


class ToolResultErrorData(EventPayload, frozen=True, kw_only=True):
    """The ``error`` of a failed ``tool.result``."""

    code: Id
    message: str


# ------------------------------------------------------------------ catalogue, in registry order
class SessionCreatedData(EventPayload, frozen=True, kw_only=True):
    """1 ``session.created``."""

    session_id: Id
    workspace: Id | UnsetType = UNSET


class SessionRestoredData(EventPayload, frozen=True, kw_only=True):
    """2 ``session.restored``."""

    session_id: Id
    after_seq: Cursor
    available_through_seq: Cursor
    available_events: Count
    outcome: Literal["ready", "completed", "interrupted"]
    note: str | UnsetType = UNSET


class AgentStartedData(EventPayload, frozen=True, kw_only=True):
    """3 ``agent.started``."""

    agent_id: Id
    session_id: Id
    task_id: Id | UnsetType = UNSET
    model: Id
    run_id: Id | UnsetType = UNSET
    turn_id: Id | UnsetType = UNSET


class AgentStoppedData(EventPayload, frozen=True, kw_only=True):
    """4 ``agent.stopped``."""

    agent_id: Id
    status: AgentStatus
    steps: Count
    tool_calls: Count
    note: str | UnsetType = UNSET
    run_id: Id | UnsetType = UNSET
    session_id: Id | UnsetType = UNSET
    turn_id: Id | UnsetType = UNSET


class TurnStartedData(EventPayload, frozen=True, kw_only=True):
    """5 ``turn.started``."""

    run_id: Id
    session_id: Id
    turn_id: Id
    input_message_id: Id


class MessageDeltaData(EventPayload, frozen=True, kw_only=True):
    """6 ``message.delta``."""

    run_id: Id
    session_id: Id
    turn_id: Id
    request_id: Id
    message_id: Id
    role: Literal["assistant"]
    sequence: Count
    delta: Annotated[str, Meta(min_length=1, max_length=MIB)]


class UserMessageCompletedData(EventPayload, frozen=True, kw_only=True):
    """7 ``message.completed``, role ``user``."""

    run_id: Id
    session_id: Id
    turn_id: Id
    message_id: Id
    role: Literal["user"]
    content: Annotated[str, Meta(min_length=1, max_length=16 * MIB)]
    state_version: Literal[1] | UnsetType = UNSET
    message_revision: Count | UnsetType = UNSET


class AssistantMessageCompletedData(EventPayload, frozen=True, kw_only=True):
    """7 ``message.completed``, role ``assistant``."""

    run_id: Id
    session_id: Id
    turn_id: Id
    message_id: Id
    request_id: Id
    role: Literal["assistant"]
    content: Annotated[str, Meta(max_length=16 * MIB)]
    finish_reason: FinishReason
    state_version: Literal[1] | UnsetType = UNSET
    message_revision: Count | UnsetType = UNSET


class ToolMessageCompletedData(EventPayload, frozen=True, kw_only=True):
    """7 ``message.completed``, role ``tool``."""

    run_id: Id
    session_id: Id
    turn_id: Id
    message_id: Id
    role: Literal["tool"]
    name: Id
    tool_call_id: Id
    content: Annotated[str, Meta(max_length=16 * MIB)]
    state_version: Literal[1] | UnsetType = UNSET
    message_revision: Count | UnsetType = UNSET


MessageCompletedData: TypeAlias = (
    UserMessageCompletedData | AssistantMessageCompletedData | ToolMessageCompletedData
)


class SteeringQueuedData(EventPayload, frozen=True, kw_only=True):
    """8 ``steering.queued``."""

    run_id: Id
    session_id: Id
    turn_id: Id
    message_id: Id
    content: Annotated[str, Meta(min_length=1, max_length=256 * KIB)]


class ContextCompactedData(EventPayload, frozen=True, kw_only=True):
    """9 ``context.compacted``: the prefix before a checkpoint's tail was replaced by its summary."""

    run_id: Id
    session_id: Id
    turn_id: Id
    request_id: Id | UnsetType = UNSET
    summary_message_id: Id
    summary: Annotated[str, Meta(min_length=1, max_length=16 * MIB)]
    before_messages: Count
    after_messages: Count
    before_tokens: Count | UnsetType = UNSET
    after_tokens: Count | UnsetType = UNSET
    usage: EventUsage | UnsetType = UNSET


class TurnCompletedData(EventPayload, frozen=True, kw_only=True):
    """10 ``turn.completed``."""

    run_id: Id
    session_id: Id
    turn_id: Id
    status: AgentStatus
    output_message_id: Id | UnsetType = UNSET
    model_requests: Count
    tool_calls: Count
    usage: EventUsage | UnsetType = UNSET
    state_version: Literal[1] | UnsetType = UNSET
    message_revision: Count | UnsetType = UNSET
    note: str | UnsetType = UNSET


class ModelRequestData(EventPayload, frozen=True, kw_only=True):
    """11 ``model.request``."""

    request_id: Id
    model: Id
    message_count: PositiveCount
    run_id: Id | UnsetType = UNSET
    session_id: Id | UnsetType = UNSET
    turn_id: Id | UnsetType = UNSET
    step: PositiveCount | UnsetType = UNSET
    context_version: Literal[1] | UnsetType = UNSET
    message_revision: Count | UnsetType = UNSET


class ModelResponseData(EventPayload, frozen=True, kw_only=True):
    """12 ``model.response``."""

    request_id: Id
    model: Id
    finish_reason: FinishReason
    usage: EventUsage
    run_id: Id | UnsetType = UNSET
    session_id: Id | UnsetType = UNSET
    turn_id: Id | UnsetType = UNSET


class ToolCallData(EventPayload, frozen=True, kw_only=True):
    """13 ``tool.call``; ``input`` may be any JSON, ``null`` included."""

    call_id: Id
    tool: Id
    input: Json | UnsetType = UNSET
    run_id: Id | UnsetType = UNSET
    session_id: Id | UnsetType = UNSET
    turn_id: Id | UnsetType = UNSET
    request_id: Id | UnsetType = UNSET
    model_call_id: Id | UnsetType = UNSET


class ToolResultData(EventPayload, frozen=True, kw_only=True):
    """14 ``tool.result``."""

    call_id: Id
    tool: Id
    ok: bool
    output: Json | UnsetType = UNSET
    error: ToolResultErrorData | UnsetType = UNSET
    duration_ms: Number | UnsetType = UNSET
    run_id: Id | UnsetType = UNSET
    session_id: Id | UnsetType = UNSET
    turn_id: Id | UnsetType = UNSET


class TaskUpdatedData(EventPayload, frozen=True, kw_only=True):
    """15 ``task.updated``."""

    task_id: Id
    phase: Literal["planned", "running", "verifying", "delivered", "blocked"]
    note: str | UnsetType = UNSET


class BudgetWarningData(EventPayload, frozen=True, kw_only=True):
    """16 ``budget.warning``."""

    task_id: Id | UnsetType = UNSET
    run_id: Id | UnsetType = UNSET
    session_id: Id | UnsetType = UNSET
    turn_id: Id | UnsetType = UNSET
    metric: Literal["steps", "tokens", "tool_calls"]
    used: Number
    limit: Number
    pct: Number


class RuntimePolicyDecisionData(EventPayload, frozen=True, kw_only=True):
    """17 ``policy.decision`` made by the runtime for one tool call."""

    task_id: Id | UnsetType = UNSET
    session_id: Id
    run_id: Id
    turn_id: Id
    call_id: Id
    action: Id
    subject: str | UnsetType = UNSET
    effect: Literal["allow", "ask", "deny"]
    reason: str | UnsetType = UNSET
    rule_id: Id | UnsetType = UNSET


class TaskPolicyDecisionData(EventPayload, frozen=True, kw_only=True):
    """17 ``policy.decision`` attributed to a task run."""

    task_id: Id
    session_id: Id
    run_id: Id
    action: Id
    subject: str | UnsetType = UNSET
    effect: Literal["allow", "ask", "deny"]
    reason: str | UnsetType = UNSET
    rule_id: Id | UnsetType = UNSET


class BarePolicyDecisionData(EventPayload, frozen=True, kw_only=True):
    """17 ``policy.decision`` without attribution (as written before M7)."""

    action: Id
    subject: str | UnsetType = UNSET
    effect: Literal["allow", "ask", "deny"]
    reason: str | UnsetType = UNSET
    rule_id: Id | UnsetType = UNSET


PolicyDecisionData: TypeAlias = RuntimePolicyDecisionData | TaskPolicyDecisionData | BarePolicyDecisionData


class PermissionRequestedData(EventPayload, frozen=True, kw_only=True):
    """18 ``permission.requested``."""

    permission_id: Id
    session_id: Id
    run_id: Id | UnsetType = UNSET
    turn_id: Id | UnsetType = UNSET
    call_id: Id | UnsetType = UNSET
    action: Id
    subject: str | UnsetType = UNSET
    scope: PermissionScope
    reason: str | UnsetType = UNSET


class PermissionResolvedData(EventPayload, frozen=True, kw_only=True):
    """19 ``permission.resolved``."""

    permission_id: Id
    session_id: Id
    run_id: Id | UnsetType = UNSET
    turn_id: Id | UnsetType = UNSET
    call_id: Id | UnsetType = UNSET
    action: Id
    subject: str | UnsetType = UNSET
    scope: PermissionScope
    decision: Literal["allow", "deny"]
    note: str | UnsetType = UNSET


class SandboxStartedData(EventPayload, frozen=True, kw_only=True):
    """20 ``sandbox.started``."""

    run_id: Id
    container_name: Id
    image: Id
    network: Literal["none", "enabled"]
    mounts: Count


class SandboxStoppedData(EventPayload, frozen=True, kw_only=True):
    """21 ``sandbox.stopped``."""

    run_id: Id
    container_name: Id
    status: Literal["completed", "failed", "canceled"]
    exit_code: SafeInt | UnsetType = UNSET
    duration_ms: Number | UnsetType = UNSET


class RunRecordedData(EventPayload, frozen=True, kw_only=True):
    """22 ``run.recorded``."""

    run_id: Id
    task_id: Id
    status: Literal["passed", "failed", "blocked"]
    report_path: Id


class RunScheduledData(EventPayload, frozen=True, kw_only=True):
    """23 ``run.scheduled``."""

    run_id: Id
    task_id: Id
    attempt: PositiveCount
    manifest_digest: Id


class RunLeasedData(EventPayload, frozen=True, kw_only=True):
    """24 ``run.leased``."""

    run_id: Id
    task_id: Id
    worker_id: Id
    fencing_token: PositiveCount
    expires_at: Timestamp


class RunUpdatedData(EventPayload, frozen=True, kw_only=True):
    """25 ``run.updated``: one transition of the run state machine (§2.4)."""

    run_id: Id
    task_id: Id
    change: RunChange
    status: RunState
    previous_status: RunState
    version: PositiveCount
    attempt: PositiveCount
    worker_id: Id | UnsetType = UNSET
    fencing_token: Count
    lease_expires_at: Timestamp | UnsetType = UNSET
    report_path: Id | UnsetType = UNSET
    note: str | UnsetType = UNSET


class ArtifactRegisteredData(EventPayload, frozen=True, kw_only=True):
    """26 ``artifact.registered``."""

    artifact_id: Id
    kind: Literal["run_report", "output", "audit"]
    bucket: Id
    key: Id
    sha256: Sha256
    bytes: Count
    content_type: Id
    task_id: Id | UnsetType = UNSET
    run_id: Id | UnsetType = UNSET
    session_id: Id | UnsetType = UNSET


class AuditExportedData(EventPayload, frozen=True, kw_only=True):
    """27 ``audit.exported``."""

    export_id: Id
    artifact_id: Id
    from_seq: Count
    to_seq: Count
    event_count: Count
    sha256: Sha256


class ErrorData(EventPayload, frozen=True, kw_only=True):
    """28 ``error``."""

    code: Id
    message: str
    retryable: bool | UnsetType = UNSET
    task_id: Id | UnsetType = UNSET
    session_id: Id | UnsetType = UNSET
    run_id: Id | UnsetType = UNSET
    stage: Literal["manifest", "git", "policy", "builder", "tests", "evidence", "report"] | UnsetType = UNSET


class SteeringAppliedData(EventPayload, frozen=True, kw_only=True):
    """29 ``steering.applied``: a queued steering message became a user message of the next request."""

    run_id: Id
    session_id: Id
    turn_id: Id
    message_id: Id
    request_id: Id
    message_revision: Count


class ContextAccountedData(EventPayload, frozen=True, kw_only=True):
    """30 ``context.accounted``: the measured occupancy of the next model request."""

    run_id: Id
    session_id: Id
    turn_id: Id
    request_id: Id
    messages: Count
    tokens: Count
    method: Literal["utf8-bytes", "tokenizer"]
    window_tokens: PositiveCount
    threshold_tokens: PositiveCount
    reserve_tokens: Count


class ContextCheckpointData(EventPayload, frozen=True, kw_only=True):
    """31 ``context.checkpoint``: a summary that stands for the session's history before ``tailStart``."""

    run_id: Id
    session_id: Id
    turn_id: Id
    revision: PositiveCount
    summary_message_id: Id
    summary: Annotated[str, Meta(min_length=1, max_length=16 * MIB)]
    tail_start: Count
    message_revision: Count


class RuntimeCheckpointData(EventPayload, frozen=True, kw_only=True):
    """32 ``runtime.checkpoint``: a versioned runtime state at a safe boundary, decoded by the runtime."""

    run_id: Id
    session_id: Id
    turn_id: Id
    version: PositiveCount
    boundary: Literal["turn", "request", "response"]
    state: Json
    request_id: Id | UnsetType = UNSET


class TurnResumedData(EventPayload, frozen=True, kw_only=True):
    """33 ``turn.resumed``: a turn interrupted by a process end was taken up from its last checkpoint."""

    run_id: Id
    session_id: Id
    turn_id: Id
    checkpoint_event_id: Id
    abandoned_request_id: Id | UnsetType = UNSET
    interrupted_calls: Count
    note: str | UnsetType = UNSET


EventType: TypeAlias = Literal[
    "session.created",
    "session.restored",
    "agent.started",
    "agent.stopped",
    "turn.started",
    "message.delta",
    "message.completed",
    "steering.queued",
    "context.compacted",
    "turn.completed",
    "model.request",
    "model.response",
    "tool.call",
    "tool.result",
    "task.updated",
    "budget.warning",
    "policy.decision",
    "permission.requested",
    "permission.resolved",
    "sandbox.started",
    "sandbox.stopped",
    "run.recorded",
    "run.scheduled",
    "run.leased",
    "run.updated",
    "artifact.registered",
    "audit.exported",
    "error",
    "steering.applied",
    "context.accounted",
    "context.checkpoint",
    "runtime.checkpoint",
    "turn.resumed",
]

EventData: TypeAlias = (
    SessionCreatedData
    | SessionRestoredData
    | AgentStartedData
    | AgentStoppedData
    | TurnStartedData
    | MessageDeltaData
    | MessageCompletedData
    | SteeringQueuedData
    | ContextCompactedData
    | TurnCompletedData
    | ModelRequestData
    | ModelResponseData
    | ToolCallData
    | ToolResultData
    | TaskUpdatedData
    | BudgetWarningData
    | PolicyDecisionData
    | PermissionRequestedData
    | PermissionResolvedData
    | SandboxStartedData
    | SandboxStoppedData
    | RunRecordedData
    | RunScheduledData
    | RunLeasedData
    | RunUpdatedData
    | ArtifactRegisteredData
    | AuditExportedData
    | ErrorData
    | SteeringAppliedData
    | ContextAccountedData
    | ContextCheckpointData
    | RuntimeCheckpointData
    | TurnResumedData
)

PayloadEntry: TypeAlias = type[EventPayload] | tuple[type[EventPayload], ...]

EVENT_PAYLOADS: Final[MappingProxyType[EventType, PayloadEntry]] = MappingProxyType(
    {
        "session.created": SessionCreatedData,
        "session.restored": SessionRestoredData,
        "agent.started": AgentStartedData,
        "agent.stopped": AgentStoppedData,
        "turn.started": TurnStartedData,
        "message.delta": MessageDeltaData,
        "message.completed": (
            UserMessageCompletedData,
            AssistantMessageCompletedData,
            ToolMessageCompletedData,
        ),
        "steering.queued": SteeringQueuedData,
        "context.compacted": ContextCompactedData,
        "turn.completed": TurnCompletedData,
        "model.request": ModelRequestData,
        "model.response": ModelResponseData,
        "tool.call": ToolCallData,
        "tool.result": ToolResultData,
        "task.updated": TaskUpdatedData,
        "budget.warning": BudgetWarningData,
        "policy.decision": (RuntimePolicyDecisionData, TaskPolicyDecisionData, BarePolicyDecisionData),
        "permission.requested": PermissionRequestedData,
        "permission.resolved": PermissionResolvedData,
        "sandbox.started": SandboxStartedData,
        "sandbox.stopped": SandboxStoppedData,
        "run.recorded": RunRecordedData,
        "run.scheduled": RunScheduledData,
        "run.leased": RunLeasedData,
        "run.updated": RunUpdatedData,
        "artifact.registered": ArtifactRegisteredData,
        "audit.exported": AuditExportedData,
        "error": ErrorData,
        "steering.applied": SteeringAppliedData,
        "context.accounted": ContextAccountedData,
        "context.checkpoint": ContextCheckpointData,
        "runtime.checkpoint": RuntimeCheckpointData,
        "turn.resumed": TurnResumedData,
    }
)
"""Event type → its payload Struct, or the closed tuple of its variants; catalogue order."""

EVENT_TYPES: Final[tuple[EventType, ...]] = get_args(EventType)
"""Every known event type, in catalogue order."""

if tuple(EVENT_PAYLOADS) != EVENT_TYPES:  # pragma: no cover - a guard for editors of this file
    raise AssertionError("EventType and EVENT_PAYLOADS disagree")


class Event(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    rename="camel",
    forbid_unknown_fields=True,
    omit_defaults=True,
    weakref=True,
):
    """One event: the envelope ``v, type, eventId, at, actor?, data`` (wire key order).

    ``type`` selects the payload Struct of ``data`` in :data:`EVENT_PAYLOADS`. Build events
    with ``create_event`` or ``deserialize_event``; both validate, ``__init__`` does not.
    """

    v: Literal[1]
    type: EventType
    event_id: Id
    at: Timestamp
    actor: Id | UnsetType = UNSET
    data: EventData
