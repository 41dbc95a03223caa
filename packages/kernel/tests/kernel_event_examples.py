"""Valid wire examples of every event type (and variant), shared by the event tests.

Not a test module: pytest runs with ``--import-mode=importlib``, so this folder is not on
``sys.path`` and each event test loads this file by path (a few lines at its top). Each
example is ``(label, type, data)`` with data keys in wire order.
"""

from __future__ import annotations

import json
from typing import Final

AT: Final = "2024-05-01T12:30:00.125Z"
SHA: Final = "0123456789abcdef" * 4

Example = tuple[str, str, dict[str, object]]

USAGE: Final[dict[str, object]] = {"promptTokens": 10, "completionTokens": 5, "totalTokens": 15}

EXAMPLES: Final[tuple[Example, ...]] = (
    ("session.created", "session.created", {"sessionId": "sess-1", "workspace": "ws-1"}),
    ("session.created minimal", "session.created", {"sessionId": "sess-1"}),
    (
        "session.restored",
        "session.restored",
        {
            "sessionId": "sess-1",
            "afterSeq": -1,
            "availableThroughSeq": 12,
            "availableEvents": 13,
            "outcome": "interrupted",
            "note": "recovered after a crash",
        },
    ),
    (
        "agent.started",
        "agent.started",
        {
            "agentId": "agent-1",
            "sessionId": "sess-1",
            "taskId": "task-1",
            "model": "fake-model/v1",
            "runId": "run-1",
            "turnId": "turn-1",
        },
    ),
    ("agent.started pre-M7", "agent.started", {"agentId": "agent-1", "sessionId": "sess-1", "model": "m"}),
    (
        "agent.stopped",
        "agent.stopped",
        {
            "agentId": "agent-1",
            "status": "budget_exceeded",
            "steps": 3,
            "toolCalls": 2,
            "note": "tool-call budget",
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
        },
    ),
    (
        "turn.started",
        "turn.started",
        {"runId": "run-1", "sessionId": "sess-1", "turnId": "turn-1", "inputMessageId": "msg-1"},
    ),
    (
        "message.delta",
        "message.delta",
        {
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
            "requestId": "req-1",
            "messageId": "msg-2",
            "role": "assistant",
            "sequence": 0,
            "delta": "Hel",
        },
    ),
    (
        "message.completed user",
        "message.completed",
        {
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
            "messageId": "msg-1",
            "role": "user",
            "content": "hello ✓",
            "stateVersion": 1,
            "messageRevision": 0,
        },
    ),
    (
        "message.completed assistant",
        "message.completed",
        {
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
            "messageId": "msg-2",
            "requestId": "req-1",
            "role": "assistant",
            "content": "",
            "finishReason": "tool_calls",
            "stateVersion": 1,
            "messageRevision": 1,
        },
    ),
    (
        "message.completed tool",
        "message.completed",
        {
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
            "messageId": "msg-3",
            "role": "tool",
            "name": "echo",
            "toolCallId": "call-1",
            "content": '{"ok":true}',
        },
    ),
    (
        "steering.queued",
        "steering.queued",
        {
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
            "messageId": "msg-9",
            "content": "stop",
        },
    ),
    (
        "context.compacted",
        "context.compacted",
        {
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
            "requestId": "req-1",
            "summaryMessageId": "msg-7",
            "summary": "the story so far",
            "beforeMessages": 40,
            "afterMessages": 3,
            "beforeTokens": 9000,
            "afterTokens": 700,
        },
    ),
    (
        "turn.completed",
        "turn.completed",
        {
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
            "status": "completed",
            "outputMessageId": "msg-2",
            "modelRequests": 1,
            "toolCalls": 0,
            "usage": USAGE,
            "stateVersion": 1,
            "messageRevision": 2,
            "note": "done",
        },
    ),
    (
        "model.request",
        "model.request",
        {
            "requestId": "req-1",
            "model": "fake-model/v1",
            "messageCount": 1,
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
            "step": 1,
            "contextVersion": 1,
            "messageRevision": 1,
        },
    ),
    (
        "model.response",
        "model.response",
        {
            "requestId": "req-1",
            "model": "fake-model/v1",
            "finishReason": "stop",
            "usage": USAGE,
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
        },
    ),
    (
        "tool.call",
        "tool.call",
        {
            "callId": "call-1",
            "tool": "echo",
            "input": {"text": "hi", "n": [1, 2.5, None, True, {"deep": []}]},
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
            "requestId": "req-1",
            "modelCallId": "mc-1",
        },
    ),
    ("tool.call null input", "tool.call", {"callId": "call-1", "tool": "echo", "input": None}),
    (
        "tool.result",
        "tool.result",
        {
            "callId": "call-1",
            "tool": "echo",
            "ok": False,
            "output": ["partial", 1],
            "error": {"code": "TOOL_FAILED", "message": "it broke"},
            "durationMs": 12.5,
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
        },
    ),
    ("task.updated", "task.updated", {"taskId": "task-1", "phase": "verifying", "note": "tests"}),
    (
        "budget.warning",
        "budget.warning",
        {
            "taskId": "task-1",
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
            "metric": "tool_calls",
            "used": 4,
            "limit": 8,
            "pct": 50,
        },
    ),
    (
        "policy.decision runtime",
        "policy.decision",
        {
            "taskId": "task-1",
            "sessionId": "sess-1",
            "runId": "run-1",
            "turnId": "turn-1",
            "callId": "call-1",
            "action": "tool.echo",
            "subject": "echo hi",
            "effect": "ask",
            "reason": "no rule",
            "ruleId": "rule-1",
        },
    ),
    (
        "policy.decision task",
        "policy.decision",
        {"taskId": "task-1", "sessionId": "sess-1", "runId": "run-1", "action": "fs.read", "effect": "allow"},
    ),
    ("policy.decision bare", "policy.decision", {"action": "fs.read", "effect": "deny", "reason": "pre-M7"}),
    (
        "permission.requested",
        "permission.requested",
        {
            "permissionId": "perm-1",
            "sessionId": "sess-1",
            "runId": "run-1",
            "turnId": "turn-1",
            "callId": "call-1",
            "action": "process.exec",
            "subject": "ls",
            "scope": "once",
            "reason": "asked",
        },
    ),
    (
        "permission.resolved",
        "permission.resolved",
        {
            "permissionId": "perm-1",
            "sessionId": "sess-1",
            "runId": "run-1",
            "turnId": "turn-1",
            "callId": "call-1",
            "action": "process.exec",
            "subject": "ls",
            "scope": "run",
            "decision": "allow",
            "note": "operator",
        },
    ),
    (
        "sandbox.started",
        "sandbox.started",
        {"runId": "run-1", "containerName": "c-1", "image": "img:1", "network": "none", "mounts": 2},
    ),
    (
        "sandbox.stopped",
        "sandbox.stopped",
        {"runId": "run-1", "containerName": "c-1", "status": "failed", "exitCode": -9, "durationMs": 1500},
    ),
    (
        "run.recorded",
        "run.recorded",
        {"runId": "run-1", "taskId": "task-1", "status": "passed", "reportPath": "reports/run-1.json"},
    ),
    (
        "run.scheduled",
        "run.scheduled",
        {"runId": "run-1", "taskId": "task-1", "attempt": 1, "manifestDigest": "sha256:abc"},
    ),
    (
        "run.leased",
        "run.leased",
        {"runId": "run-1", "taskId": "task-1", "workerId": "w-1", "fencingToken": 1, "expiresAt": AT},
    ),
    (
        "run.updated",
        "run.updated",
        {
            "runId": "run-1",
            "taskId": "task-1",
            "change": "started",
            "status": "running",
            "previousStatus": "leased",
            "version": 2,
            "attempt": 1,
            "workerId": "w-1",
            "fencingToken": 1,
            "leaseExpiresAt": "2024-05-01T12:35:00+02:00",
            "note": "go",
        },
    ),
    (
        "run.updated completed",
        "run.updated",
        {
            "runId": "run-1",
            "taskId": "task-1",
            "change": "completed",
            "status": "passed",
            "previousStatus": "running",
            "version": 3,
            "attempt": 1,
            "fencingToken": 0,
            "reportPath": "reports/run-1.json",
        },
    ),
    (
        "artifact.registered",
        "artifact.registered",
        {
            "artifactId": "art-1",
            "kind": "run_report",
            "bucket": "reports",
            "key": "run-1.json",
            "sha256": SHA,
            "bytes": 2048,
            "contentType": "application/json",
            "taskId": "task-1",
            "runId": "run-1",
            "sessionId": "sess-1",
        },
    ),
    (
        "audit.exported",
        "audit.exported",
        {
            "exportId": "exp-1",
            "artifactId": "art-1",
            "fromSeq": 0,
            "toSeq": 0,
            "eventCount": 1,
            "sha256": SHA,
        },
    ),
    (
        "error",
        "error",
        {
            "code": "E_MANIFEST",
            "message": "",
            "retryable": False,
            "taskId": "task-1",
            "sessionId": "sess-1",
            "runId": "run-1",
            "stage": "manifest",
        },
    ),
    (
        "steering.applied",
        "steering.applied",
        {
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
            "messageId": "msg-9",
            "requestId": "req-2",
            "messageRevision": 5,
        },
    ),
    (
        "context.accounted",
        "context.accounted",
        {
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
            "requestId": "req-2",
            "messages": 12,
            "tokens": 5300,
            "method": "utf8-bytes",
            "windowTokens": 8000,
            "thresholdTokens": 6000,
            "reserveTokens": 1000,
        },
    ),
    (
        "context.checkpoint",
        "context.checkpoint",
        {
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
            "revision": 1,
            "summaryMessageId": "msg-7",
            "summary": "the story so far",
            "tailStart": 37,
            "messageRevision": 40,
        },
    ),
    (
        "runtime.checkpoint",
        "runtime.checkpoint",
        {
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
            "version": 1,
            "boundary": "request",
            "state": {"messages": [{"role": "user", "content": "hi"}]},
            "requestId": "req-2",
        },
    ),
    (
        "turn.resumed",
        "turn.resumed",
        {
            "runId": "run-1",
            "sessionId": "sess-1",
            "turnId": "turn-1",
            "checkpointEventId": "evt-7",
            "abandonedRequestId": "req-2",
            "interruptedCalls": 1,
            "note": "resumed after a restart",
        },
    ),
)


def document(event_type: str, data: object, **envelope: object) -> dict[str, object]:
    """A wire document in key order; ``envelope`` overrides or adds envelope keys."""
    base: dict[str, object] = {"v": 1, "type": event_type, "eventId": "evt-1", "at": AT, "actor": "kernel"}
    base.update(envelope)
    base["data"] = data
    return base


def compact(value: object) -> bytes:
    """Compact UTF-8 JSON, like the kernel's encoder for these examples."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
