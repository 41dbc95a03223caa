"""The ``run-report/v2`` and ``run-preflight-report/v1`` records and validators (exit-gate.md §9, §10)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Final, Literal, TypeAlias, cast

import msgspec
from msgspec import UNSET, UnsetType

from harness_exit_gate._errors import RunReportError
from harness_kernel.events import (
    EventParseError,
    EventSchemaError,
    EventVersionError,
    RunRecordedData,
    TaskPolicyDecisionData,
    UnknownEventTypeError,
    deserialize_event,
)

__all__ = [
    "CURRENT_RUN_REPORT_SCHEMA",
    "MAINISH",
    "RUN_PREFLIGHT_REPORT_SCHEMA",
    "RUN_REPORT_SCHEMA",
    "Builder",
    "Change",
    "Deliverables",
    "Failure",
    "GitEvidence",
    "Issue",
    "ModelUsage",
    "PolicySummary",
    "PreflightDeliverables",
    "PreflightError",
    "PreflightTask",
    "RunPreflightReport",
    "RunReport",
    "Snapshot",
    "TaskRef",
    "TestsRecord",
    "encode_report",
    "validate_report_artifact",
    "validate_run_preflight_report",
    "validate_run_report",
]

RUN_REPORT_SCHEMA: Final = "run-report/v1"
"""The legacy schema: accepted for reading only."""
CURRENT_RUN_REPORT_SCHEMA: Final = "run-report/v2"
RUN_PREFLIGHT_REPORT_SCHEMA: Final = "run-preflight-report/v1"
MAINISH: Final = ("main", "master", "trunk", "develop")

_TIMESTAMP: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z", re.ASCII)
_SHA: Final = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}", re.ASCII)
_LOCAL_BASE: Final = re.compile(r"refs/(?:heads|remotes/origin)/(?:main|master|trunk|develop)", re.ASCII)

Stage: TypeAlias = Literal["manifest", "git", "policy", "builder", "tests", "evidence", "report"]
Status: TypeAlias = Literal["passed", "failed", "blocked"]
Origin: TypeAlias = Literal["committed", "staged", "unstaged", "untracked"]
NonNegative: TypeAlias = Annotated[int, msgspec.Meta(ge=0)]


class _Record(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    pass


class Issue(_Record, frozen=True, kw_only=True):
    """One manifest issue carried by a failure."""

    path: str
    message: str


class Failure(_Record, frozen=True, kw_only=True):
    """Why a run did not pass."""

    stage: Stage
    code: str
    message: str
    issues: tuple[Issue, ...] | UnsetType = UNSET


class TaskRef(_Record, frozen=True, kw_only=True):
    """The task a report is about."""

    id: str
    title: str
    path: str


class PolicySummary(_Record, frozen=True, kw_only=True):
    """The changed-path verdict."""

    changed_paths_ok: bool
    changed_paths: tuple[str, ...]
    violations: tuple[str, ...]


class TestsRecord(_Record, frozen=True, kw_only=True):
    """What the test command did."""

    __test__ = False  # not a pytest test class
    command: str
    exit_code: int
    ok: bool
    duration_ms: NonNegative
    total: NonNegative | UnsetType = UNSET
    passed: NonNegative | UnsetType = UNSET
    failed: NonNegative | UnsetType = UNSET
    output_tail: str


class Builder(_Record, frozen=True, kw_only=True):
    """Reserved for builder-driven runs."""

    name: str
    ok: bool
    duration_ms: NonNegative
    exit_code: int | UnsetType = UNSET
    output_tail: str


class ModelUsage(_Record, frozen=True, kw_only=True):
    """Reserved for builder-driven runs."""

    total_model_tokens: NonNegative
    total_tool_calls: NonNegative
    steps: NonNegative


class Change(_Record, frozen=True, kw_only=True):
    """One changed path found by a snapshot."""

    origin: Origin
    status: str
    path: str
    old_path: str | UnsetType = UNSET


class Snapshot(_Record, frozen=True, kw_only=True):
    """Every change at one moment, and the paths the policy checks."""

    changes: tuple[Change, ...]
    policy_paths: tuple[str, ...]


class GitEvidence(_Record, frozen=True, kw_only=True):
    """Where and against what the changes were computed."""

    repository_root: str
    mode: Literal["local", "ci"]
    expected_branch: str
    actual_branch: str | UnsetType = UNSET
    detached: bool
    head_sha: str
    base_ref: str
    base_sha: str
    merge_base_sha: str
    pre_test: Snapshot
    post_test: Snapshot | UnsetType = UNSET


class Deliverables(_Record, frozen=True, kw_only=True):
    """What the run delivered."""

    pull_request: str | UnsetType = UNSET
    artifacts: tuple[str, ...]
    report_path: str
    report_written: bool
    session_id: str | UnsetType = UNSET


class RunReport(_Record, frozen=True, kw_only=True):
    """A ``run-report/v2`` document, keys in schema order."""

    schema: Literal["run-report/v2"]
    run_id: str
    status: Status
    started_at: str
    finished_at: str
    branch: str
    task: TaskRef
    policy: PolicySummary
    tests: TestsRecord | UnsetType = UNSET
    builder: Builder | UnsetType = UNSET
    model_usage: ModelUsage | UnsetType = UNSET
    git: GitEvidence | UnsetType = UNSET
    failure: Failure | UnsetType = UNSET
    failures: tuple[Failure, ...] | UnsetType = UNSET
    events: tuple[str, ...]
    deliverables: Deliverables


class PreflightTask(_Record, frozen=True, kw_only=True):
    """The task identity, once it is trusted."""

    id: str
    title: str


class PreflightError(_Record, frozen=True, kw_only=True):
    """Why the run stopped before it started."""

    stage: Literal["manifest", "git"]
    code: str
    message: str
    issues: tuple[Issue, ...] | UnsetType = UNSET


class PreflightDeliverables(_Record, frozen=True, kw_only=True):
    """Where the preflight report went."""

    pull_request: str | UnsetType = UNSET
    artifacts: tuple[str, ...] = ()
    report_path: str
    report_written: bool | UnsetType = UNSET
    session_id: str | UnsetType = UNSET


class RunPreflightReport(_Record, frozen=True, kw_only=True):
    """A ``run-preflight-report/v1`` document, keys in schema order."""

    schema: Literal["run-preflight-report/v1"]
    manifest_path: str
    run_id: str
    session_id: str
    status: Literal["failed"]
    started_at: str
    finished_at: str
    branch: str | UnsetType = UNSET
    task: PreflightTask | UnsetType = UNSET
    error: PreflightError
    failures: tuple[PreflightError, ...] | UnsetType = UNSET
    events: tuple[str, ...]
    deliverables: PreflightDeliverables


def encode_report(report: RunReport | RunPreflightReport) -> bytes:
    """UTF-8 JSON, keys in schema order, two-space indent, trailing newline."""
    return msgspec.json.format(msgspec.json.encode(report), indent=2) + b"\n"


# ------------------------------------------------------------------ validation


def _document(value: object, prefix: str) -> object:
    if isinstance(value, bytes | str):
        try:
            return msgspec.json.decode(value)
        except msgspec.DecodeError as error:
            raise RunReportError(f"{prefix}: not JSON ({error})") from None
    return value


def _convert(value: object, kind: type[msgspec.Struct], prefix: str) -> object:
    if not isinstance(value, Mapping):
        raise RunReportError(f"{prefix}: a report must be a JSON object")
    try:
        return msgspec.convert(value, kind, strict=True)
    except msgspec.ValidationError as error:
        raise RunReportError(f"{prefix}: {error}") from None


def _check_events(events: Sequence[str], prefix: str) -> list[tuple[str, object]]:
    decoded: list[tuple[str, object]] = []
    for index, wire in enumerate(events):
        try:
            event = deserialize_event(wire)
        except (EventParseError, EventVersionError, UnknownEventTypeError, EventSchemaError) as error:
            raise RunReportError(f"{prefix}: events.{index} does not deserialise ({error})") from None
        decoded.append((event.type, event.data))
    return decoded


def _check_time(value: str, field: str, prefix: str) -> None:
    if _TIMESTAMP.fullmatch(value) is None:
        raise RunReportError(f"{prefix}: {field} must be ISO-8601 UTC with milliseconds")


def _check_sha(value: str, field: str, prefix: str) -> None:
    if _SHA.fullmatch(value) is None:
        raise RunReportError(f"{prefix}: {field} must be 40 or 64 lowercase hex")


def _check_snapshot(snapshot: Snapshot, field: str, prefix: str) -> None:
    expected: set[str] = set()
    for index, change in enumerate(snapshot.changes):
        renamed_or_copied = change.status[:1] in ("R", "C")
        if renamed_or_copied != (change.old_path is not UNSET):
            raise RunReportError(
                f"{prefix}: {field}.changes.{index}.oldPath must be present exactly for R and C statuses"
            )
        expected.add(change.path)
        if change.status.startswith("R") and isinstance(change.old_path, str):
            expected.add(change.old_path)
    if list(snapshot.policy_paths) != sorted(expected):
        raise RunReportError(f"{prefix}: {field}.policyPaths must be the sorted unique change paths")


def _check_git(git: GitEvidence, report: RunReport, prefix: str) -> None:
    if git.expected_branch != report.branch:
        raise RunReportError(f"{prefix}: git.expectedBranch must equal branch")
    if git.actual_branch is not UNSET and git.actual_branch != report.branch:
        raise RunReportError(f"{prefix}: git.actualBranch must equal branch")
    if git.detached != (git.actual_branch is UNSET):
        raise RunReportError(f"{prefix}: git.detached must hold exactly when actualBranch is absent")
    if git.mode == "local":
        if git.detached:
            raise RunReportError(f"{prefix}: a local report is never detached")
        if _LOCAL_BASE.fullmatch(git.base_ref) is None:
            raise RunReportError(f"{prefix}: a local git.baseRef must name a mainish branch")
    elif git.base_ref != git.base_sha:
        raise RunReportError(f"{prefix}: a CI git.baseRef must equal git.baseSha")
    for field, value in (
        ("git.headSha", git.head_sha),
        ("git.baseSha", git.base_sha),
        ("git.mergeBaseSha", git.merge_base_sha),
    ):
        _check_sha(value, field, prefix)
    _check_snapshot(git.pre_test, "git.preTest", prefix)
    union = set(git.pre_test.policy_paths)
    if isinstance(git.post_test, Snapshot):
        _check_snapshot(git.post_test, "git.postTest", prefix)
        union.update(git.post_test.policy_paths)
    if list(report.policy.changed_paths) != sorted(union):
        raise RunReportError(f"{prefix}: policy.changedPaths must be the union of the snapshots' policyPaths")


def _check_attribution(
    decoded: list[tuple[str, object]], task_id: str, run_id: str, session_id: str | UnsetType, prefix: str
) -> None:
    for index, (kind, data) in enumerate(decoded):
        if kind != "policy.decision":
            continue
        if not isinstance(data, TaskPolicyDecisionData):
            raise RunReportError(
                f"{prefix}: events.{index} policy.decision must carry taskId, sessionId and runId"
            )
        if data.task_id != task_id or data.run_id != run_id:
            raise RunReportError(f"{prefix}: events.{index} policy.decision must carry this taskId and runId")
        if session_id is not UNSET and data.session_id != session_id:
            raise RunReportError(
                f"{prefix}: events.{index} policy.decision must carry deliverables.sessionId"
            )


def validate_run_report(report: Mapping[str, object] | str | bytes) -> RunReport:
    """Check a ``run-report/v2`` document against its schema and the invariants of exit-gate.md §10.

    Args:
        report: A decoded JSON object, or its JSON text.

    Raises:
        RunReportError: ``invalid run report: …`` naming the first breach.
    """
    prefix = "invalid run report"
    checked = _convert(_document(report, prefix), RunReport, prefix)
    assert isinstance(checked, RunReport)
    _check_time(checked.started_at, "startedAt", prefix)
    _check_time(checked.finished_at, "finishedAt", prefix)
    if checked.task.path != f"tasks/{checked.task.id}.yaml":
        raise RunReportError(f"{prefix}: task.path must be tasks/<id>.yaml")
    if checked.branch != f"tasks/{checked.task.id}":
        raise RunReportError(f"{prefix}: branch must be tasks/<task.id>")
    policy = checked.policy
    if policy.changed_paths_ok != (not policy.violations):
        raise RunReportError(f"{prefix}: policy.changedPathsOk must hold exactly when violations is empty")
    if not set(policy.violations) <= set(policy.changed_paths):
        raise RunReportError(f"{prefix}: every policy violation must be a changed path")
    if isinstance(checked.tests, TestsRecord) and checked.tests.ok != (checked.tests.exit_code == 0):
        raise RunReportError(f"{prefix}: tests.ok must hold exactly when tests.exitCode is 0")
    if (
        isinstance(checked.builder, Builder)
        and checked.builder.ok
        and checked.builder.exit_code not in (UNSET, 0)
    ):
        raise RunReportError(f"{prefix}: builder.ok cannot be true with a non-zero exit code")
    if isinstance(checked.git, GitEvidence):
        _check_git(checked.git, checked, prefix)
    if (checked.failure is UNSET) != (checked.failures is UNSET):
        raise RunReportError(f"{prefix}: failure and failures appear together")
    if isinstance(checked.failures, tuple):
        if not checked.failures:
            raise RunReportError(f"{prefix}: failures must not be empty")
        if checked.failure not in checked.failures:
            raise RunReportError(f"{prefix}: failures must contain failure")
    deliverables = checked.deliverables
    decoded = _check_events(checked.events, prefix)
    _check_attribution(decoded, checked.task.id, checked.run_id, deliverables.session_id, prefix)
    receipts = [data for kind, data in decoded if kind == "run.recorded"]
    if deliverables.report_written:
        if len(receipts) != 1:
            raise RunReportError(f"{prefix}: reportWritten:true requires exactly one run.recorded")
        receipt = receipts[0]
        assert isinstance(receipt, RunRecordedData)
        if (receipt.run_id, receipt.task_id, receipt.status, receipt.report_path) != (
            checked.run_id,
            checked.task.id,
            checked.status,
            deliverables.report_path,
        ):
            raise RunReportError(f"{prefix}: run.recorded must match runId, taskId, status and reportPath")
    elif receipts:
        raise RunReportError(f"{prefix}: reportWritten:false forbids run.recorded")
    if checked.status == "passed":
        tests_ok = isinstance(checked.tests, TestsRecord) and checked.tests.ok
        post_test = isinstance(checked.git, GitEvidence) and checked.git.post_test is not UNSET
        builder_ok = not (isinstance(checked.builder, Builder) and not checked.builder.ok)
        if not (
            tests_ok
            and post_test
            and not policy.violations
            and checked.failure is UNSET
            and builder_ok
            and deliverables.report_written
            and deliverables.session_id is not UNSET
        ):
            raise RunReportError(
                f"{prefix}: passed requires tests.ok, git.postTest, no violations, no failure, "
                "builder.ok not false, reportWritten:true and a sessionId"
            )
    elif checked.failure is UNSET:
        raise RunReportError(f"{prefix}: status {checked.status} requires failure")
    return checked


def validate_run_preflight_report(report: Mapping[str, object] | str | bytes) -> RunPreflightReport:
    """Check a ``run-preflight-report/v1`` document (exit-gate.md §9.4).

    Raises:
        RunReportError: ``invalid run preflight report: …`` naming the first breach.
    """
    prefix = "invalid run preflight report"
    checked = _convert(_document(report, prefix), RunPreflightReport, prefix)
    assert isinstance(checked, RunPreflightReport)
    _check_time(checked.started_at, "startedAt", prefix)
    _check_time(checked.finished_at, "finishedAt", prefix)
    if checked.deliverables.report_written is not UNSET and (
        checked.failures is UNSET or checked.error not in checked.failures
    ):
        raise RunReportError(f"{prefix}: with reportWritten, failures is required and must contain error")
    if isinstance(checked.task, PreflightTask) and checked.branch not in (UNSET, f"tasks/{checked.task.id}"):
        raise RunReportError(f"{prefix}: branch must be tasks/<task.id>")
    decoded = _check_events(checked.events, prefix)
    if isinstance(checked.task, PreflightTask):
        _check_attribution(decoded, checked.task.id, checked.run_id, checked.session_id, prefix)
    return checked


def validate_report_artifact(
    report: Mapping[str, object] | str | bytes,
) -> RunReport | RunPreflightReport | Mapping[str, object]:
    """Validate a report of any known schema, dispatching on ``schema``.

    A legacy ``run-report/v1`` is accepted for reading only and returned as the decoded object.

    Raises:
        RunReportError: ``invalid report artifact: …`` for an unknown or missing schema, or the
            validator's own error.
    """
    prefix = "invalid report artifact"
    document = _document(report, prefix)
    if not isinstance(document, Mapping):
        raise RunReportError(f"{prefix}: a report must be a JSON object")
    mapping = cast("Mapping[str, object]", document)
    schema = mapping.get("schema")
    if schema == CURRENT_RUN_REPORT_SCHEMA:
        return validate_run_report(mapping)
    if schema == RUN_PREFLIGHT_REPORT_SCHEMA:
        return validate_run_preflight_report(mapping)
    if schema == RUN_REPORT_SCHEMA:
        return mapping
    raise RunReportError(f"{prefix}: unknown schema {schema!r}")
