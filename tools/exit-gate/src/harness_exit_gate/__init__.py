"""harness-exit-gate: task manifests, the changed-path exit gate and the ``harness-eval`` runner.

The gate checks, headlessly and offline, that a task branch stayed inside its manifest's
``allowed_paths`` before and after its test command, that ``process.exec`` allows that
command, and that it passes; it writes ``run-report/v2`` evidence with a SQLite companion
under ``tasks/runs/<runId>/`` (exit-gate.md).
"""

from harness_exit_gate._cli import main
from harness_exit_gate._command import parse_command
from harness_exit_gate._errors import CommandParseError, ExitGateError, RunReportError
from harness_exit_gate._manifest_file import load_task_manifest_file
from harness_exit_gate._report import (
    CURRENT_RUN_REPORT_SCHEMA,
    RUN_PREFLIGHT_REPORT_SCHEMA,
    RUN_REPORT_SCHEMA,
    RunPreflightReport,
    RunReport,
    validate_report_artifact,
    validate_run_preflight_report,
    validate_run_report,
)

__all__ = [
    "CURRENT_RUN_REPORT_SCHEMA",
    "RUN_PREFLIGHT_REPORT_SCHEMA",
    "RUN_REPORT_SCHEMA",
    "CommandParseError",
    "ExitGateError",
    "RunPreflightReport",
    "RunReport",
    "RunReportError",
    "load_task_manifest_file",
    "main",
    "parse_command",
    "validate_report_artifact",
    "validate_run_preflight_report",
    "validate_run_report",
]
