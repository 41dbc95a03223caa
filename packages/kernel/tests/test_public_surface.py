"""Pins the public surface of harness-kernel's published modules (names only).

A change here is a change downstream code may depend on: make it on purpose, with the
version and the changelog (see ARCHITECTURE.md, "Versioning").
"""

from __future__ import annotations

import importlib

import pytest

import harness_kernel
import harness_workspace

EXPECTED: dict[str, set[str]] = {
    "harness_kernel": {
        "CommandRequest",
        "CommandResult",
        "HarnessError",
        "Workspace",
        "WorkspaceCapability",
        "WorkspaceSnapshot",
        "is_harness_error",
    },
    "harness_kernel.events": {
        "AgentStartedData",
        "AgentStoppedData",
        "ArtifactRegisteredData",
        "AssistantMessageCompletedData",
        "AuditExportedData",
        "BarePolicyDecisionData",
        "BudgetWarningData",
        "CURRENT_EVENT_VERSION",
        "ContextCompactedData",
        "EVENT_PAYLOADS",
        "EVENT_TYPES",
        "EVT_BAD_JSON",
        "EVT_BAD_PAYLOAD",
        "EVT_UNKNOWN_TYPE",
        "EVT_UNSUPPORTED_VERSION",
        "ErrorData",
        "Event",
        "EventData",
        "EventParseError",
        "EventPayload",
        "EventSchemaError",
        "EventType",
        "EventUsage",
        "EventVersionError",
        "MessageCompletedData",
        "MessageDeltaData",
        "ModelRequestData",
        "ModelResponseData",
        "PermissionRequestedData",
        "PermissionResolvedData",
        "PolicyDecisionData",
        "REDACTED",
        "REDACTION_MAX_DEPTH",
        "RunLeasedData",
        "RunRecordedData",
        "RunScheduledData",
        "RunUpdatedData",
        "RuntimePolicyDecisionData",
        "SUPPORTED_EVENT_VERSIONS",
        "SandboxStartedData",
        "SandboxStoppedData",
        "SchemaIssue",
        "SessionCreatedData",
        "SessionRestoredData",
        "SteeringQueuedData",
        "TaskPolicyDecisionData",
        "TaskUpdatedData",
        "ToolCallData",
        "ToolMessageCompletedData",
        "ToolResultData",
        "ToolResultErrorData",
        "TurnCompletedData",
        "TurnStartedData",
        "UnknownEventTypeError",
        "UserMessageCompletedData",
        "create_event",
        "deserialize_event",
        "is_event_type",
        "redact_event",
        "redact_value",
        "serialize_event",
    },
    "harness_kernel.policy": {
        "CompiledGlob",
        "CompiledRules",
        "Decision",
        "EFFECTS",
        "Effect",
        "InvalidPermissionRulesError",
        "InvalidPolicyInputError",
        "MAX_ID_CHARS",
        "MAX_REASON_CHARS",
        "POLICY_INVALID_INPUT",
        "POLICY_INVALID_RULES",
        "PermissionController",
        "PermissionDecision",
        "PermissionMap",
        "PermissionRequest",
        "PermissionResolution",
        "PermissionResolve",
        "RANK",
        "Rule",
        "RulePermissionController",
        "ToolPermissionIntent",
        "check_changed_paths",
        "compile_glob",
        "compile_rules",
        "decide",
        "match_glob",
        "path_allowed",
        "translate",
    },
    "harness_kernel.manifest": {
        "DELIVERY_TYPES",
        "Delivery",
        "DeliveryType",
        "MANIFEST_INVALID",
        "MAX_MANIFEST_BYTES",
        "ManifestIssue",
        "ManifestParseError",
        "RESERVED_ACTIONS",
        "TaskBudget",
        "TaskManifest",
        "decode_task_manifest",
        "load_task_manifest",
        "manifest_permissions",
    },
}


@pytest.mark.parametrize("module_name", sorted(EXPECTED))
def test_each_published_module_exports_exactly_its_pinned_names(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert set(module.__all__) == EXPECTED[module_name]
    assert len(module.__all__) == len(EXPECTED[module_name]), "duplicate entries in __all__"
    for name in module.__all__:
        assert hasattr(module, name), name


def test_the_root_re_exports_the_workspace_contract_types_themselves() -> None:
    for name in ("Workspace", "CommandRequest", "CommandResult", "WorkspaceSnapshot", "WorkspaceCapability"):
        assert getattr(harness_kernel, name) is getattr(harness_workspace, name)
