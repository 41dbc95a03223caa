"""Pins the public surface of harness-exit-gate's published modules (names only).

A change here is a change downstream code may depend on: make it on purpose, with the
version and the changelog (ARCHITECTURE.md, "Versioning of the contract").
"""

from __future__ import annotations

import importlib

import pytest

EXPECTED: dict[str, set[str]] = {
    "harness_exit_gate": {
        "CURRENT_RUN_REPORT_SCHEMA",
        "CommandParseError",
        "ExitGateError",
        "RUN_PREFLIGHT_REPORT_SCHEMA",
        "RUN_REPORT_SCHEMA",
        "RunPreflightReport",
        "RunReport",
        "RunReportError",
        "load_task_manifest_file",
        "main",
        "parse_command",
        "validate_report_artifact",
        "validate_run_preflight_report",
        "validate_run_report",
    },
    "harness_exit_gate.evals": {
        "EventInvariant",
        "GoldenRun",
        "InvariantCheckError",
        "InvariantValue",
        "ReportExpectation",
        "RequestExpectation",
        "RunExpectation",
        "SCENARIO_INVALID",
        "SCENARIO_INVARIANT_INVALID",
        "SCENARIO_RUNTIME_FAILED",
        "Scenario",
        "ScenarioCommand",
        "ScenarioConversation",
        "ScenarioConversationTurn",
        "ScenarioExpectation",
        "ScenarioOutcome",
        "ScenarioParseError",
        "ScenarioRuntimeError",
        "ScenarioSteer",
        "ScenarioToolCall",
        "ScenarioTurn",
        "ScenarioWorkspace",
        "assert_known_event_types",
        "decode_scenario",
        "execute_scenario",
        "load_scenario",
        "load_script",
        "stream_satisfies",
    },
    "harness_exit_gate.manifest": {
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


@pytest.mark.parametrize(("module_name", "names"), sorted(EXPECTED.items()))
def test_a_published_module_exports_its_pinned_names_once_each(module_name: str, names: set[str]) -> None:
    module = importlib.import_module(module_name)
    # Sorted lists, not sets: a name listed twice in __all__ fails too.
    assert sorted(module.__all__) == sorted(names)
    assert [name for name in names if not hasattr(module, name)] == []
