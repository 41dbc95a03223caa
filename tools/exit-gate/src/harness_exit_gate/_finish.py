"""The end of ``run`` (exit-gate.md §5, §9): the status, the SQLite companion and the report.

The report is written into ``tasks/runs/<runId>/``, else into a fallback directory; a report
that does not validate is rebuilt without its tests and git evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal, TypeAlias

from msgspec import UNSET, UnsetType

from harness_exit_gate._errors import RunReportError
from harness_exit_gate._evidence import (
    EvidenceError,
    fallback_directory,
    persist_companion,
    prepare_run_directory,
    write_atomically,
)
from harness_exit_gate._preflight import PreflightFailed
from harness_exit_gate._report import (
    CURRENT_RUN_REPORT_SCHEMA,
    RUN_PREFLIGHT_REPORT_SCHEMA,
    Deliverables,
    Failure,
    GitEvidence,
    Issue,
    PolicySummary,
    PreflightDeliverables,
    PreflightError,
    PreflightTask,
    RunPreflightReport,
    RunReport,
    TaskRef,
    TestsRecord,
    encode_report,
    validate_run_preflight_report,
    validate_run_report,
)
from harness_exit_gate._state import ACTOR, RunOutcome, RunState
from harness_exit_gate.manifest import TaskManifest
from harness_kernel.events import (
    EventData,
    EventType,
    RunRecordedData,
    TaskUpdatedData,
    create_event,
    now_timestamp,
    serialize_event,
)

__all__ = ["finish", "preflight_report"]

_BLOCKING: Final = frozenset(
    (
        "PATH_SCOPE_VIOLATION",
        "PROTECTED_PATH_VIOLATION",
        "GITATTRIBUTES_CHANGED",
        "SYMLINK_TARGET_VIOLATION",
        "POST_TEST_PATH_SCOPE_VIOLATION",
        "PROCESS_EXEC_DENIED",
        "PROCESS_EXEC_APPROVAL_REQUIRED",
        "TEST_TIMEOUT_INVALID",
        "TEST_COMMAND_INVALID",
        "MANIFEST_MUTATED_DURING_RUN",
        "TEST_PROCESS_GROUP_CLEANUP_FAILED",
    )
)
Status: TypeAlias = Literal["passed", "failed", "blocked"]


def _primary(failures: list[Failure], status: Status) -> Failure:
    if status == "blocked":
        return next(failure for failure in failures if failure.code in _BLOCKING or failure.stage == "git")
    return failures[0]


def _status(failures: list[Failure]) -> Status:
    if not failures:
        return "passed"
    if any(failure.code in _BLOCKING or failure.stage == "git" for failure in failures):
        return "blocked"
    return "failed"


def _terminal_events(
    run: RunState, task_id: str, status: Status, note: str | None, report_path: str | None
) -> list[str]:
    phase = "delivered" if status == "passed" else "blocked"
    events: list[tuple[EventType, EventData]] = [
        ("task.updated", TaskUpdatedData(task_id=task_id, phase=phase, note=UNSET if note is None else note))
    ]
    if report_path is not None:
        receipt = RunRecordedData(run_id=run.run_id, task_id=task_id, status=status, report_path=report_path)
        events.append(("run.recorded", receipt))
    return [
        serialize_event(create_event(kind, data, actor=ACTOR, at=now_timestamp())).decode()
        for kind, data in events
    ]


def _persist(run: RunState, directory: Path | None, task_id: str | None) -> bool:
    if directory is None:
        return False
    try:
        persist_companion(
            directory / "session.sqlite",
            session_id=run.session_id,
            task_id=task_id,
            created_at=run.started_at,
            events=run.events,
        )
    except EvidenceError as error:
        run.fail("evidence", "SESS_PERSIST_FAILED", str(error))
        return False
    return True


def _store_companion(run: RunState, root: str, task_id: str) -> tuple[Path | None, bool]:
    try:
        directory = prepare_run_directory(root, run.run_id)
    except EvidenceError as error:
        run.fail("evidence", "SESS_PERSIST_FAILED", str(error))
        return None, False
    return directory, _persist(run, directory, task_id)


@dataclass
class _ReportBuilder:
    """Builds the run report of a finished run, at whichever path it ends up written to."""

    run: RunState
    task: TaskManifest
    policy: PolicySummary
    tests: TestsRecord | None
    git: GitEvidence | None
    persisted: bool
    finished_at: str = field(default_factory=now_timestamp)
    wires: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        # The events of the run so far, serialised once; the terminal pair is added per build.
        self.wires = tuple(serialize_event(event).decode() for event in self.run.events)

    def build(self, report_path: str | None, intended: str, *, stripped: bool) -> RunReport:
        run, task = self.run, self.task
        status = _status(run.failures)
        failure = _primary(run.failures, status) if run.failures else None
        note = failure.message if failure is not None else None
        written = report_path is not None
        pr: str | UnsetType = UNSET
        if run.options.pull_request_url:
            pr = run.options.pull_request_url
        elif status == "passed":
            pr = f"branch: tasks/{task.id}"
        return RunReport(
            schema=CURRENT_RUN_REPORT_SCHEMA,
            run_id=run.run_id,
            status=status,
            started_at=run.started_at,
            finished_at=self.finished_at,
            branch=f"tasks/{task.id}",
            task=TaskRef(id=task.id, title=task.title, path=f"tasks/{task.id}.yaml"),
            policy=self.policy,
            tests=UNSET if self.tests is None or stripped else self.tests,
            git=UNSET if self.git is None or stripped else self.git,
            failure=UNSET if failure is None else failure,
            failures=UNSET if not run.failures else tuple(run.failures),
            events=(*self.wires, *_terminal_events(run, task.id, status, note, report_path)),
            deliverables=Deliverables(
                pull_request=pr,
                artifacts=(f"tasks/runs/{run.run_id}/session.sqlite",) if self.persisted else (),
                report_path=report_path if written else intended,
                report_written=written,
                session_id=run.session_id if self.persisted else UNSET,
            ),
        )

    def valid(self, report_path: str | None, intended: str) -> RunReport:
        """The report, or, when it does not validate, the report without tests and git evidence."""
        report = self.build(report_path, intended, stripped=False)
        try:
            validate_run_report(encode_report(report))
        except RunReportError as error:
            if not any(failure.code == "REPORT_CONSTRUCTION_FAILED" for failure in self.run.failures):
                self.run.fail("report", "REPORT_CONSTRUCTION_FAILED", error.message)
            report = self.build(report_path, intended, stripped=True)
        return report


def _write_report(
    builder: _ReportBuilder, directory: Path | None, canonical: str
) -> tuple[RunReport, str | None]:
    """Write the report into the run directory, else the fallback; return it and where it went."""
    run = builder.run
    report = builder.valid(canonical, canonical)
    if directory is not None:
        try:
            write_atomically(directory, "report.json", encode_report(report))
            return report, canonical
        except EvidenceError as error:
            run.fail("report", "REPORT_WRITE_FAILED", str(error))
    else:
        run.fail("report", "REPORT_WRITE_FAILED", "the run directory is unavailable")
    try:
        fallback = fallback_directory()
        path = str(fallback / "report.json")
        report = builder.valid(path, canonical)
        write_atomically(fallback, "report.json", encode_report(report))
        return report, path
    except EvidenceError as error:
        run.fail("report", "REPORT_FALLBACK_WRITE_FAILED", str(error))
        return builder.valid(None, canonical), None


def finish(
    run: RunState, root: str, policy: PolicySummary, tests: TestsRecord | None, git: GitEvidence | None
) -> RunOutcome:
    """Steps 11 and 12: the terminal events, the companion and the run report, written."""
    task = run.task
    assert task is not None
    if run.failures:
        run.error_event(_primary(run.failures, _status(run.failures)))
    canonical = f"tasks/runs/{run.run_id}/report.json"
    directory, persisted = _store_companion(run, root, task.id)
    builder = _ReportBuilder(run=run, task=task, policy=policy, tests=tests, git=git, persisted=persisted)
    report, written_to = _write_report(builder, directory, canonical)
    passed = report.status == "passed" and written_to == canonical
    return RunOutcome(
        exit_code=0 if passed else 1,
        report=encode_report(report),
        report_path=written_to or canonical,
        report_written=written_to is not None,
        failures=tuple((failure.code, failure.message) for failure in run.failures),
    )


def preflight_report(run: RunState, root: str | None, error: PreflightFailed) -> RunOutcome:
    """The preflight report of a run that stopped before its snapshots, written where it can be."""
    issues: tuple[Issue, ...] | UnsetType = error.issues if error.issues else UNSET
    failure = PreflightError(stage=error.stage, code=error.code, message=str(error), issues=issues)
    run.failures.append(Failure(stage=error.stage, code=error.code, message=str(error), issues=issues))
    run.error_event(run.failures[-1])
    task = run.task if error.manifest is not None else None
    directory: Path | None = None
    if root is not None:
        try:
            directory = prepare_run_directory(root, run.run_id)
        except EvidenceError:
            directory = None
    canonical = f"tasks/runs/{run.run_id}/preflight.json"
    persisted = False
    target_directory = directory
    if target_directory is None:
        try:
            target_directory = fallback_directory()
        except EvidenceError:
            target_directory = None
    if target_directory is not None:
        persisted = _persist(run, target_directory, task.id if task is not None else None)
    wires = tuple(serialize_event(event).decode() for event in run.events)
    finished_at = now_timestamp()

    def build(report_path: str, written: bool) -> RunPreflightReport:
        return RunPreflightReport(
            schema=RUN_PREFLIGHT_REPORT_SCHEMA,
            manifest_path=run.options.manifest,
            run_id=run.run_id,
            session_id=run.session_id,
            status="failed",
            started_at=run.started_at,
            finished_at=finished_at,
            branch=f"tasks/{task.id}" if task is not None else UNSET,
            task=PreflightTask(id=task.id, title=task.title) if task is not None else UNSET,
            error=failure,
            failures=(failure,),
            events=wires,
            deliverables=PreflightDeliverables(
                pull_request=run.options.pull_request_url or UNSET,
                report_path=report_path,
                report_written=written,
                session_id=run.session_id if persisted else UNSET,
            ),
        )

    written_to: str | None = None
    report = build(canonical, True)
    if directory is not None:
        try:
            write_atomically(directory, "preflight.json", encode_report(report))
            written_to = canonical
        except EvidenceError:
            written_to = None
    if written_to is None and target_directory is not None:
        path = str(target_directory / "preflight.json")
        report = build(path, True)
        try:
            write_atomically(target_directory, "preflight.json", encode_report(report))
            written_to = path
        except EvidenceError:
            written_to = None
    if written_to is None:
        report = build(canonical, False)
    validate_run_preflight_report(encode_report(report))
    return RunOutcome(
        exit_code=1,
        report=encode_report(report),
        report_path=written_to or canonical,
        report_written=written_to is not None,
        failures=((error.code, str(error)),),
    )
