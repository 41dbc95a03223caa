"""Typed downstream use of harness-exit-gate, checked by pyright strict in CI (never executed)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import assert_type

from harness_exit_gate import (
    CURRENT_RUN_REPORT_SCHEMA,
    RUN_PREFLIGHT_REPORT_SCHEMA,
    RUN_REPORT_SCHEMA,
    CommandParseError,
    ExitGateError,
    RunPreflightReport,
    RunReport,
    RunReportError,
    load_task_manifest_file,
    main,
    parse_command,
    validate_report_artifact,
    validate_run_preflight_report,
    validate_run_report,
)
from harness_exit_gate.evals import Scenario, ScenarioOutcome, execute_scenario, load_scenario
from harness_exit_gate.manifest import (
    ManifestParseError,
    TaskManifest,
    load_task_manifest,
    manifest_permissions,
)
from harness_kernel.policy import PermissionMap


async def typed_scenario(scenario_text: str, manifest_text: str) -> None:
    manifest = load_task_manifest(manifest_text)
    assert_type(manifest, TaskManifest)
    assert_type(manifest_permissions(manifest), PermissionMap)
    scenario = load_scenario(scenario_text)
    assert_type(scenario, Scenario)
    assert_type(await execute_scenario(scenario, {manifest.id: manifest}), ScenarioOutcome)


def typed_usage(report_text: str, report_bytes: bytes, report_object: Mapping[str, object]) -> None:
    assert_type(main(["validate", "tasks/demo.yaml"]), int)
    assert_type(main(), int)

    try:
        argv = parse_command("uv run --frozen pytest")
    except CommandParseError as error:
        assert_type(error.code, str)
        assert_type(error.message, str)
    else:
        assert_type(argv, tuple[str, ...])

    try:
        manifest = load_task_manifest_file(Path("tasks/demo.yaml"))
    except ManifestParseError as error:
        del error
    else:
        assert_type(manifest, TaskManifest)
        assert_type(load_task_manifest_file("tasks/demo.yaml").allowed_paths[0], str)

    try:
        run_report = validate_run_report(report_text)
        assert_type(run_report, RunReport)
        assert_type(run_report.run_id, str)
        assert_type(validate_run_preflight_report(report_bytes), RunPreflightReport)
        artifact = validate_report_artifact(report_object)
        assert_type(artifact, RunReport | RunPreflightReport | Mapping[str, object])
    except RunReportError as error:
        assert_type(error, RunReportError)
        base: ExitGateError = error
        assert_type(base.code, str)

    schemas: tuple[str, str, str] = (
        CURRENT_RUN_REPORT_SCHEMA,
        RUN_PREFLIGHT_REPORT_SCHEMA,
        RUN_REPORT_SCHEMA,
    )
    del schemas
