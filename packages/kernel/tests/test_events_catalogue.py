"""The event catalogue (kernel.md §2.3, §2.4): every type round-trips, every rule bites.

Each valid example decodes, re-encodes to the very same bytes and equals what
``create_event`` builds from the same data. Each constraint is then broken on its own and
must be reported at its dotted wire path.
"""

from __future__ import annotations

from typing import Final

import kernel_event_examples as examples
import msgspec
import pytest

from harness_kernel.events import (
    AssistantMessageCompletedData,
    BarePolicyDecisionData,
    Event,
    EventSchemaError,
    EventUsage,
    ModelResponseData,
    RuntimePolicyDecisionData,
    RunUpdatedData,
    SessionCreatedData,
    TaskPolicyDecisionData,
    ToolCallData,
    ToolMessageCompletedData,
    UserMessageCompletedData,
    create_event,
    deserialize_event,
    is_event_type,
    serialize_event,
)
from harness_kernel.events._model import EVENT_PAYLOADS, EVENT_TYPES

MIB: Final = 1_048_576
DROP: Final = object()
BY_LABEL: Final = {label: (event_type, data) for label, event_type, data in examples.EXAMPLES}


def changed(label: str, changes: dict[str, object]) -> tuple[str, dict[str, object]]:
    """The example ``label`` with keys set (or removed with ``DROP``), keeping wire order."""
    event_type, data = BY_LABEL[label]
    result = {key: value for key, value in data.items() if changes.get(key) is not DROP}
    result.update({key: value for key, value in changes.items() if value is not DROP})
    return event_type, result


def schema_issues(event_type: str, data: object, **envelope: object) -> tuple[tuple[str, str], ...]:
    with pytest.raises(EventSchemaError) as caught:
        deserialize_event(examples.compact(examples.document(event_type, data, **envelope)))
    assert caught.value.type == event_type
    return caught.value.issues


# ------------------------------------------------------------------ the registry
def test_registry_lists_the_33_types_in_catalogue_order_and_examples_cover_them_all() -> None:
    assert len(EVENT_TYPES) == 33
    assert tuple(EVENT_PAYLOADS) == EVENT_TYPES
    assert EVENT_TYPES[0] == "session.created"
    assert EVENT_TYPES[27] == "error"
    assert EVENT_TYPES[-1] == "turn.resumed"
    assert {event_type for _, event_type, _ in examples.EXAMPLES} == set(EVENT_TYPES)


def test_variant_types_map_to_their_closed_variant_sets() -> None:
    assert EVENT_PAYLOADS["message.completed"] == (
        UserMessageCompletedData,
        AssistantMessageCompletedData,
        ToolMessageCompletedData,
    )
    assert EVENT_PAYLOADS["policy.decision"] == (
        RuntimePolicyDecisionData,
        TaskPolicyDecisionData,
        BarePolicyDecisionData,
    )
    assert EVENT_PAYLOADS["session.created"] is SessionCreatedData


@pytest.mark.parametrize("value", ["session.created", "error", "run.updated"])
def test_is_event_type_accepts_known_names(value: str) -> None:
    assert is_event_type(value)


class _NameLike(str):
    __slots__ = ()


@pytest.mark.parametrize("value", ["nope", "", "Error", None, 1, _NameLike("error"), b"error"])
def test_is_event_type_rejects_anything_else(value: object) -> None:
    assert not is_event_type(value)


# ------------------------------------------------------------------ valid examples
@pytest.mark.parametrize(
    ("label", "event_type", "data"), examples.EXAMPLES, ids=[e[0] for e in examples.EXAMPLES]
)
def test_valid_example_round_trips_byte_identically(
    label: str, event_type: str, data: dict[str, object]
) -> None:
    raw = examples.compact(examples.document(event_type, data))
    event = deserialize_event(raw)
    assert serialize_event(event) == raw
    assert deserialize_event(serialize_event(event)) == event
    assert deserialize_event(raw.decode()) == event
    created = create_event(event_type, data, event_id="evt-1", at=examples.AT, actor="kernel")  # pyright: ignore[reportArgumentType]
    assert created == event
    assert hash(created) == hash(event)


@pytest.mark.parametrize(
    ("label", "variant"),
    [
        ("message.completed user", UserMessageCompletedData),
        ("message.completed assistant", AssistantMessageCompletedData),
        ("message.completed tool", ToolMessageCompletedData),
        ("policy.decision runtime", RuntimePolicyDecisionData),
        ("policy.decision task", TaskPolicyDecisionData),
        ("policy.decision bare", BarePolicyDecisionData),
    ],
)
def test_variants_are_chosen_by_role_or_attribution(label: str, variant: type) -> None:
    event_type, data = BY_LABEL[label]
    assert type(create_event(event_type, data).data) is variant  # pyright: ignore[reportArgumentType]


def test_payload_attributes_are_snake_case_and_json_fields_are_frozen() -> None:
    event = create_event("tool.call", BY_LABEL["tool.call"][1])
    data = event.data
    assert isinstance(data, ToolCallData)
    assert data.model_call_id == "mc-1"
    assert data.input == {"text": "hi", "n": [1, 2.5, None, True, {"deep": []}]}
    with pytest.raises(TypeError):
        data.input["text"] = "changed"  # pyright: ignore[reportIndexIssue, reportOptionalSubscript]


def test_create_event_accepts_payload_structs_and_fills_the_envelope() -> None:
    usage = EventUsage(prompt_tokens=1, completion_tokens=2, total_tokens=3)
    data = ModelResponseData(request_id="req-1", model="m", finish_reason="length", usage=usage)
    event = create_event("model.response", data)
    assert event.data == data
    assert event.actor is msgspec.UNSET
    assert len(event.event_id) == 36
    assert event.at.endswith("Z")
    assert len(event.at) == len("2024-05-01T12:30:00.125Z")
    assert b'"actor"' not in serialize_event(event)
    text = serialize_event(event).decode()
    assert text.startswith('{"v":1,"type":"model.response","eventId":')


def test_create_event_rejects_a_payload_struct_of_another_type() -> None:
    with pytest.raises(EventSchemaError) as caught:
        create_event(
            "session.created",
            ModelResponseData(
                request_id="r",
                model="m",
                finish_reason="stop",
                usage=EventUsage(prompt_tokens=0, completion_tokens=0, total_tokens=0),
            ),
        )
    paths = {path for path, _ in caught.value.issues}
    assert {"data.sessionId", "data.requestId", "data.usage"} <= paths


def test_serialize_event_revalidates_a_hand_built_event() -> None:
    bad = Event(
        v=1, type="session.created", event_id="", at="yesterday", data=SessionCreatedData(session_id="")
    )
    with pytest.raises(EventSchemaError) as caught:
        serialize_event(bad)
    assert [path for path, _ in caught.value.issues] == ["eventId", "at", "data.sessionId"]


def test_serialize_event_refuses_what_is_not_exactly_an_event() -> None:
    with pytest.raises(TypeError):
        serialize_event(object())  # pyright: ignore[reportArgumentType]


# ------------------------------------------------------------------ every constraint
Case = tuple[str, dict[str, object], str, str]

REJECTIONS: Final[tuple[Case, ...]] = (
    ("session.created", {"sessionId": ""}, "data.sessionId", "must not be empty"),
    ("session.created", {"sessionId": None}, "data.sessionId", "must be a string (got null)"),
    ("session.created", {"sessionId": DROP}, "data.sessionId", "is required"),
    ("session.created", {"workspace": ""}, "data.workspace", "must not be empty"),
    ("session.created", {"extra": 1}, "data.extra", "is not allowed in session.created"),
    ("session.restored", {"afterSeq": -2}, "data.afterSeq", "must be at least -1"),
    ("session.restored", {"availableThroughSeq": 1.5}, "data.availableThroughSeq", "must be an integer"),
    ("session.restored", {"availableEvents": -1}, "data.availableEvents", "must be at least 0"),
    ("session.restored", {"outcome": "done"}, "data.outcome", "must be one of ready, completed, interrupted"),
    ("session.restored", {"note": 5}, "data.note", "must be a string"),
    ("agent.started", {"model": ""}, "data.model", "must not be empty"),
    ("agent.started", {"agentId": DROP}, "data.agentId", "is required"),
    ("agent.started", {"runId": 7}, "data.runId", "must be a string"),
    ("agent.stopped", {"status": "ok"}, "data.status", "must be one of"),
    ("agent.stopped", {"steps": 2**53}, "data.steps", "must be a safe integer"),
    ("agent.stopped", {"toolCalls": True}, "data.toolCalls", "must be an integer (got boolean)"),
    ("turn.started", {"inputMessageId": DROP}, "data.inputMessageId", "is required"),
    ("message.delta", {"role": "user"}, "data.role", 'must be "assistant"'),
    ("message.delta", {"sequence": -1}, "data.sequence", "must be at least 0"),
    ("message.delta", {"delta": ""}, "data.delta", "must not be empty"),
    ("message.delta", {"delta": "x" * (MIB + 1)}, "data.delta", f"must be at most {MIB} characters"),
    ("message.completed user", {"content": ""}, "data.content", "must not be empty"),
    (
        "message.completed user",
        {"requestId": "req-1"},
        "data.requestId",
        "is not allowed in message.completed",
    ),
    ("message.completed user", {"finishReason": "stop"}, "data.finishReason", "is not allowed"),
    ("message.completed user", {"stateVersion": 2}, "data.stateVersion", "must be 1"),
    ("message.completed user", {"stateVersion": True}, "data.stateVersion", "must be 1"),
    (
        "message.completed user",
        {"messageRevision": DROP},
        "data.messageRevision",
        "is required together with",
    ),
    ("message.completed user", {"role": "system"}, "data.role", "must be one of user, assistant, tool"),
    ("message.completed user", {"role": DROP}, "data.role", "is required"),
    ("message.completed user", {"turnId": DROP}, "data.turnId", "is required"),
    ("message.completed assistant", {"finishReason": DROP}, "data.finishReason", "is required"),
    ("message.completed assistant", {"finishReason": "done"}, "data.finishReason", "must be one of"),
    ("message.completed assistant", {"requestId": DROP}, "data.requestId", "is required"),
    ("message.completed assistant", {"stateVersion": DROP}, "data.stateVersion", "is required together"),
    ("message.completed tool", {"name": DROP}, "data.name", "is required"),
    ("message.completed tool", {"toolCallId": ""}, "data.toolCallId", "must not be empty"),
    ("message.completed tool", {"requestId": "req-1"}, "data.requestId", "is not allowed"),
    ("message.completed tool", {"finishReason": "stop"}, "data.finishReason", "is not allowed"),
    ("steering.queued", {"content": "x" * (256 * 1024 + 1)}, "data.content", "must be at most 262144"),
    ("steering.queued", {"content": ""}, "data.content", "must not be empty"),
    ("context.compacted", {"afterMessages": 40}, "data.afterMessages", "must be less than beforeMessages"),
    (
        "context.compacted",
        {"afterTokens": DROP},
        "data.afterTokens",
        "is required together with beforeTokens",
    ),
    ("context.compacted", {"afterTokens": 9000}, "data.afterTokens", "must be less than beforeTokens"),
    ("context.compacted", {"summary": ""}, "data.summary", "must not be empty"),
    ("turn.completed", {"status": "passed"}, "data.status", "must be one of"),
    (
        "turn.completed",
        {"usage": {"promptTokens": 1, "completionTokens": 1}},
        "data.usage.totalTokens",
        "required",
    ),
    (
        "turn.completed",
        {"usage": {"promptTokens": -1, "completionTokens": 0, "totalTokens": 0}},
        "data.usage.promptTokens",
        "must be at least 0",
    ),
    ("turn.completed", {"usage": [1, 2, 3]}, "data.usage", "must be an object (got array)"),
    (
        "turn.completed",
        {"stateVersion": DROP},
        "data.stateVersion",
        "is required together with messageRevision",
    ),
    ("turn.completed", {"modelRequests": DROP}, "data.modelRequests", "is required"),
    ("model.request", {"messageCount": 0}, "data.messageCount", "must be at least 1"),
    ("model.request", {"step": 0}, "data.step", "must be at least 1"),
    ("model.request", {"contextVersion": 2}, "data.contextVersion", "must be 1"),
    (
        "model.request",
        {"messageRevision": DROP},
        "data.messageRevision",
        "is required together with contextVersion",
    ),
    ("model.response", {"finishReason": "done"}, "data.finishReason", "must be one of stop, tool_calls"),
    ("model.response", {"usage": DROP}, "data.usage", "is required"),
    ("model.response", {"model": DROP}, "data.model", "is required"),
    ("tool.call", {"tool": ""}, "data.tool", "must not be empty"),
    ("tool.call", {"input": {"big": 2**60}}, "data.input", "must be JSON data (integer outside"),
    ("tool.call", {"callId": DROP}, "data.callId", "is required"),
    ("tool.result", {"ok": "yes"}, "data.ok", "must be a boolean (got string)"),
    ("tool.result", {"error": {"code": "", "message": "m"}}, "data.error.code", "must not be empty"),
    ("tool.result", {"error": {"code": "c", "message": "m", "x": 1}}, "data.error.x", "is not allowed"),
    ("tool.result", {"error": {"code": "c"}}, "data.error.message", "is required"),
    ("tool.result", {"durationMs": -1}, "data.durationMs", "must be at least 0"),
    ("tool.result", {"durationMs": -0.5}, "data.durationMs", "must be at least 0"),
    ("tool.result", {"durationMs": "1"}, "data.durationMs", "must be a number (got string)"),
    ("tool.result", {"durationMs": 2**53}, "data.durationMs", "must be a safe integer"),
    ("task.updated", {"phase": "x"}, "data.phase", "must be one of planned, running"),
    ("budget.warning", {"metric": "memory"}, "data.metric", "must be one of steps, tokens, tool_calls"),
    ("budget.warning", {"pct": -0.5}, "data.pct", "must be at least 0"),
    ("budget.warning", {"used": "1"}, "data.used", "must be a number"),
    ("budget.warning", {"limit": DROP}, "data.limit", "is required"),
    ("policy.decision runtime", {"effect": "maybe"}, "data.effect", "must be one of allow, ask, deny"),
    ("policy.decision runtime", {"callId": DROP}, "data.callId", "is required"),
    ("policy.decision runtime", {"ruleId": ""}, "data.ruleId", "must not be empty"),
    ("policy.decision task", {"runId": DROP}, "data.runId", "is required"),
    ("policy.decision task", {"taskId": DROP}, "data.taskId", "is required"),
    ("policy.decision bare", {"taskId": "task-1"}, "data.sessionId", "is required"),
    ("policy.decision bare", {"action": ""}, "data.action", "must not be empty"),
    ("policy.decision bare", {"effect": DROP}, "data.effect", "is required"),
    ("permission.requested", {"scope": "forever"}, "data.scope", "must be one of once, run"),
    ("permission.requested", {"action": ""}, "data.action", "must not be empty"),
    ("permission.requested", {"sessionId": DROP}, "data.sessionId", "is required"),
    ("permission.resolved", {"decision": "ask"}, "data.decision", "must be one of allow, deny"),
    ("permission.resolved", {"permissionId": ""}, "data.permissionId", "must not be empty"),
    ("sandbox.started", {"network": "host"}, "data.network", "must be one of none, enabled"),
    ("sandbox.started", {"mounts": -1}, "data.mounts", "must be at least 0"),
    ("sandbox.stopped", {"status": "passed"}, "data.status", "must be one of completed, failed, canceled"),
    ("sandbox.stopped", {"exitCode": 1.5}, "data.exitCode", "must be an integer"),
    ("sandbox.stopped", {"exitCode": -(2**53)}, "data.exitCode", "must be a safe integer"),
    ("run.recorded", {"status": "canceled"}, "data.status", "must be one of passed, failed, blocked"),
    ("run.recorded", {"reportPath": ""}, "data.reportPath", "must not be empty"),
    ("run.scheduled", {"attempt": 0}, "data.attempt", "must be at least 1"),
    ("run.scheduled", {"manifestDigest": DROP}, "data.manifestDigest", "is required"),
    ("run.leased", {"fencingToken": 0}, "data.fencingToken", "must be at least 1"),
    ("run.leased", {"expiresAt": "2024-13-01T00:00:00Z"}, "data.expiresAt", "valid calendar date"),
    ("run.leased", {"expiresAt": "tomorrow"}, "data.expiresAt", "must be a timestamp"),
    ("run.updated", {"previousStatus": "queued"}, "data.change", "does not allow queued -> running"),
    ("run.updated", {"workerId": DROP}, "data.workerId", "is required when status is running"),
    ("run.updated", {"leaseExpiresAt": DROP}, "data.leaseExpiresAt", "is required when status is running"),
    ("run.updated", {"fencingToken": 0}, "data.fencingToken", "must be at least 1 when status is running"),
    ("run.updated", {"version": 0}, "data.version", "must be at least 1"),
    ("run.updated", {"status": "paused"}, "data.status", "must be one of queued, leased"),
    ("run.updated", {"change": "resumed"}, "data.change", "must be one of started, heartbeat"),
    ("run.updated completed", {"workerId": "w-1"}, "data.workerId", "is not allowed when status is passed"),
    ("run.updated completed", {"leaseExpiresAt": examples.AT}, "data.leaseExpiresAt", "is not allowed when"),
    ("run.updated completed", {"previousStatus": "leased"}, "data.change", "does not allow leased -> passed"),
    ("run.updated completed", {"fencingToken": -1}, "data.fencingToken", "must be at least 0"),
    ("artifact.registered", {"sha256": "0123456789ABCDEF" * 4}, "data.sha256", "64 lowercase hexadecimal"),
    ("artifact.registered", {"sha256": "ab"}, "data.sha256", "64 lowercase hexadecimal"),
    ("artifact.registered", {"kind": "log"}, "data.kind", "must be one of run_report, output, audit"),
    ("artifact.registered", {"bytes": -1}, "data.bytes", "must be at least 0"),
    ("artifact.registered", {"contentType": ""}, "data.contentType", "must not be empty"),
    ("audit.exported", {"fromSeq": 1}, "data.toSeq", "must be at least fromSeq"),
    ("audit.exported", {"eventCount": DROP}, "data.eventCount", "is required"),
    ("error", {"stage": "deploy"}, "data.stage", "must be one of manifest, git, policy"),
    ("error", {"retryable": "no"}, "data.retryable", "must be a boolean"),
    ("error", {"code": ""}, "data.code", "must not be empty"),
    ("error", {"message": None}, "data.message", "must be a string (got null)"),
)


@pytest.mark.parametrize(
    ("label", "changes", "path", "message"), REJECTIONS, ids=[f"{c[0]}:{c[2]}" for c in REJECTIONS]
)
def test_each_constraint_is_reported_at_its_wire_path(
    label: str, changes: dict[str, object], path: str, message: str
) -> None:
    event_type, data = changed(label, changes)
    issues = schema_issues(event_type, data)
    assert any(found == path and message in text for found, text in issues), issues


@pytest.mark.parametrize(
    ("label", "changes", "paths"),
    [
        (
            "run.updated",
            {"workerId": DROP, "leaseExpiresAt": DROP, "fencingToken": 0},
            ["data.workerId", "data.leaseExpiresAt", "data.fencingToken"],
        ),
        ("policy.decision bare", {"taskId": "task-1"}, ["data.sessionId", "data.runId"]),
        (
            "model.response",
            {"usage": {"promptTokens": "1", "completionTokens": -1, "extra": 0}},
            [
                "data.usage.promptTokens",
                "data.usage.completionTokens",
                "data.usage.totalTokens",
                "data.usage.extra",
            ],
        ),
    ],
)
def test_rules_report_every_problem_not_only_the_first(
    label: str, changes: dict[str, object], paths: list[str]
) -> None:
    event_type, data = changed(label, changes)
    assert [path for path, _ in schema_issues(event_type, data)] == paths


def test_run_updated_accepts_every_transition_of_the_state_machine() -> None:
    transitions = [
        ("started", "leased", "running"),
        ("heartbeat", "leased", "leased"),
        ("heartbeat", "running", "running"),
        ("completed", "running", "passed"),
        ("completed", "running", "failed"),
        ("completed", "running", "blocked"),
        ("lease_expired_requeued", "leased", "queued"),
        ("lease_expired_indeterminate", "running", "indeterminate"),
        ("reconciled", "indeterminate", "queued"),
        ("reconciled", "indeterminate", "canceled"),
        *(
            ("canceled", state, "canceled")
            for state in (
                "queued",
                "leased",
                "running",
                "passed",
                "failed",
                "blocked",
                "canceled",
                "indeterminate",
            )
        ),
    ]
    for change, previous, status in transitions:
        leased = status in ("leased", "running")
        data: dict[str, object] = {
            "runId": "run-1",
            "taskId": "task-1",
            "change": change,
            "status": status,
            "previousStatus": previous,
            "version": 2,
            "attempt": 1,
        }
        if leased:
            data["workerId"] = "w-1"
        data["fencingToken"] = 3 if leased else 0
        if leased:
            data["leaseExpiresAt"] = examples.AT
        event = create_event("run.updated", data)
        assert isinstance(event.data, RunUpdatedData)
        assert event.data.change == change


def test_pre_m7_payloads_without_run_turn_or_revision_stay_decodable() -> None:
    old = [
        ("agent.started", {"agentId": "a", "sessionId": "s", "model": "m"}),
        ("agent.stopped", {"agentId": "a", "status": "completed", "steps": 1, "toolCalls": 0}),
        ("model.request", {"requestId": "r", "model": "m", "messageCount": 2}),
        ("model.response", {"requestId": "r", "model": "m", "finishReason": "stop", "usage": examples.USAGE}),
        ("tool.call", {"callId": "c", "tool": "t"}),
        ("tool.result", {"callId": "c", "tool": "t", "ok": True}),
        (
            "turn.completed",
            {
                "runId": "r",
                "sessionId": "s",
                "turnId": "t",
                "status": "failed",
                "modelRequests": 0,
                "toolCalls": 0,
            },
        ),
        ("policy.decision", {"action": "fs.read", "effect": "allow"}),
        ("budget.warning", {"metric": "steps", "used": 4, "limit": 8, "pct": 50.0}),
    ]
    for event_type, data in old:
        raw = examples.compact(examples.document(event_type, data))
        assert serialize_event(deserialize_event(raw)) == raw


VALID_TIMESTAMPS: Final = (
    "2024-02-29T00:00:00Z",
    "2000-02-29T23:59:59.999999+14:00",
    "2023-12-31T23:59:59.5-00:30",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.123456789Z",
)
INVALID_TIMESTAMPS: Final = (
    "2023-02-29T00:00:00Z",
    "1900-02-29T00:00:00Z",
    "2024-04-31T00:00:00Z",
    "2024-00-10T00:00:00Z",
    "2024-01-00T00:00:00Z",
    "2024-01-01T24:00:00Z",
    "2024-01-01T00:60:00Z",
    "2024-01-01T00:00:60Z",
    "2024-01-01T00:00:00+24:00",
    "2024-01-01T00:00:00+01:60",
    "0000-01-01T00:00:00Z",
    "2024-01-01 00:00:00Z",
    "2024-01-01T00:00:00",
    "2024-01-01T00:00:00.Z",
    "2024-01-01T00:00:00z",
    "2024-01-01T00:00:00+0100",
    "2024-1-01T00:00:00Z",
    "\uff12\uff10\uff12\uff14-01-01T00:00:00Z",  # fullwidth digits
    "2024-01-01T00:00:00Z\n",
    "",
)


@pytest.mark.parametrize("at", VALID_TIMESTAMPS)
def test_calendar_valid_timestamps_are_accepted(at: str) -> None:
    event = create_event("session.created", {"sessionId": "s"}, at=at)
    assert event.at == at


@pytest.mark.parametrize("at", INVALID_TIMESTAMPS)
def test_malformed_or_impossible_timestamps_are_rejected_at_path_at(at: str) -> None:
    issues = schema_issues("session.created", {"sessionId": "s"}, at=at)
    assert [path for path, _ in issues] == ["at"]


@pytest.mark.parametrize(
    ("envelope", "path", "message"),
    [
        ({"eventId": ""}, "eventId", "must not be empty"),
        ({"eventId": 1}, "eventId", "must be a string (got integer)"),
        ({"actor": ""}, "actor", "must not be empty"),
        ({"actor": None}, "actor", "must be a string (got null)"),
        ({"at": 1714566600}, "at", "must be a string"),
        ({"trace": "x"}, "trace", "is not allowed in an event"),
    ],
)
def test_envelope_constraints_are_reported_at_top_level_paths(
    envelope: dict[str, object], path: str, message: str
) -> None:
    issues = schema_issues("session.created", {"sessionId": "s"}, **envelope)
    assert any(found == path and message in text for found, text in issues), issues


def test_json_fields_reject_nesting_deeper_than_64_levels() -> None:
    deep: object = "leaf"
    for _ in range(66):  # containers at depths 0..65 (the root is 0)
        deep = [deep]
    issues = schema_issues("tool.call", {"callId": "c", "tool": "t", "input": deep})
    assert issues[0][0] == "data.input"
    assert "nesting deeper than 64 levels" in issues[0][1]
    fine: object = "leaf"
    for _ in range(65):
        fine = [fine]
    assert create_event("tool.call", {"callId": "c", "tool": "t", "input": fine})


def test_content_limits_count_code_points_not_bytes() -> None:
    _, data = changed("message.completed assistant", {"content": "é" * (16 * MIB)})
    assert create_event("message.completed", data)
    _, data = changed("message.completed assistant", {"content": "é" * (16 * MIB + 1)})
    with pytest.raises(EventSchemaError) as caught:
        create_event("message.completed", data)
    assert caught.value.issues == (("data.content", f"must be at most {16 * MIB} characters"),)
