"""The ``run`` algorithm (exit-gate.md §5): preflight, snapshots, the test command, evidence."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal, TypeAlias

from msgspec import UNSET, UnsetType

from harness_exit_gate._command import parse_command
from harness_exit_gate._errors import CommandParseError, ExitGateError, GitCheckError, RunReportError
from harness_exit_gate._evidence import (
    EvidenceError,
    fallback_directory,
    persist_companion,
    prepare_run_directory,
    write_atomically,
)
from harness_exit_gate._git import (
    RUNS_DIR,
    BaseInfo,
    Git,
    GitState,
    capture_stable_snapshot,
    check_repository_safety,
    fingerprint_runs,
    is_full_oid,
    local_base,
    read_state,
    resolve_base,
    symbolic_links,
    top_level,
)
from harness_exit_gate._manifest_file import read_manifest_bytes
from harness_exit_gate._process import run_test_command
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
    Snapshot,
    Stage,
    TaskRef,
    TestsRecord,
    encode_report,
    validate_run_preflight_report,
    validate_run_report,
)
from harness_exit_gate._trust import (
    PROTECTED_PATHS,
    base_manifest_bytes,
    gate_inside_checkout,
    is_attributes_file,
    is_protected,
    link_escape,
)
from harness_exit_gate.manifest import (
    ManifestParseError,
    TaskManifest,
    load_task_manifest,
    manifest_permissions,
)
from harness_kernel.events import (
    ErrorData,
    Event,
    EventData,
    EventType,
    RunRecordedData,
    TaskPolicyDecisionData,
    TaskUpdatedData,
    create_event,
    now_timestamp,
    random_id,
    serialize_event,
)
from harness_kernel.policy import decide, path_allowed

__all__ = ["DEFAULT_TEST_COMMAND", "DEFAULT_TIMEOUT_MS", "RunOptions", "RunOutcome", "run_gate"]

ACTOR: Final = "harness-exit-gate"
DEFAULT_TEST_COMMAND: Final = "uv run --frozen pytest"
DEFAULT_TIMEOUT_MS: Final = "300000"
_MAX_TIMEOUT_MS: Final = 2_147_483_647
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
Effect: TypeAlias = Literal["allow", "ask", "deny"]
Status: TypeAlias = Literal["passed", "failed", "blocked"]


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """The ``run`` command's inputs, as given on the command line."""

    manifest: str
    cwd: str
    base: str | None = None
    test_command: str = DEFAULT_TEST_COMMAND
    timeout_ms: str = DEFAULT_TIMEOUT_MS
    ci_head_ref: str | None = None
    head_sha: str | None = None
    pull_request_url: str | None = None
    allow_gate_in_checkout: bool = False

    @property
    def ci(self) -> bool:
        """Whether the CI flags select CI mode (exit-gate.md §6.1)."""
        return self.ci_head_ref is not None or self.head_sha is not None


@dataclass(frozen=True, kw_only=True)
class RunOutcome:
    """What ``run`` printed and returned."""

    exit_code: int
    report: bytes
    report_path: str
    report_written: bool
    failures: tuple[tuple[str, str], ...]


class _Preflight(Exception):
    def __init__(
        self, stage: Literal["manifest", "git"], code: str, message: str, issues: tuple[Issue, ...] = ()
    ):
        super().__init__(message)
        self.stage: Literal["manifest", "git"] = stage
        self.code = code
        self.issues = issues
        self.manifest: _Manifest | None = None


def _issues(error: ManifestParseError) -> tuple[Issue, ...]:
    return tuple(Issue(path=issue.path, message=issue.message) for issue in error.issues)


@dataclass
class _Manifest:
    path: Path
    digest: str
    manifest: TaskManifest


@dataclass
class _Run:
    options: RunOptions
    run_id: str = field(default_factory=lambda: random_id("run"))
    session_id: str = field(default_factory=lambda: random_id("sess"))
    started_at: str = field(default_factory=now_timestamp)
    events: list[Event] = field(default_factory=list[Event])
    failures: list[Failure] = field(default_factory=list[Failure])
    errors_emitted: set[str] = field(default_factory=set[str])
    task: TaskManifest | None = None
    root: str | None = None
    # Why each changed symbolic link found so far reaches beyond the scope.
    escaping_links: dict[str, str] = field(default_factory=dict[str, str])

    # -------------------------------------------------------------- events

    def emit(self, kind: EventType, data: EventData) -> Event:
        event = create_event(kind, data, actor=ACTOR, at=now_timestamp())
        self.events.append(event)
        return event

    def decision(self, action: str, subject: str, effect: Effect, reason: str) -> None:
        assert self.task is not None
        self.emit(
            "policy.decision",
            TaskPolicyDecisionData(
                task_id=self.task.id,
                session_id=self.session_id,
                run_id=self.run_id,
                action=action,
                subject=subject,
                effect=effect,
                reason=reason,
            ),
        )

    def error_event(self, failure: Failure) -> None:
        if failure.code in self.errors_emitted:
            return
        self.errors_emitted.add(failure.code)
        self.emit(
            "error",
            ErrorData(
                code=failure.code,
                message=failure.message,
                retryable=False,
                task_id=UNSET if self.task is None else self.task.id,
                session_id=self.session_id,
                run_id=self.run_id,
                stage=failure.stage,
            ),
        )

    def fail(self, stage: Stage, code: str, message: str, *, event: bool = False) -> None:
        failure = Failure(stage=stage, code=code, message=message)
        self.failures.append(failure)
        if event:
            self.error_event(failure)

    # -------------------------------------------------------------- manifest

    def read_manifest(self, root: str) -> _Manifest:
        argument = Path(os.path.realpath(self.options.cwd)) / self.options.manifest
        try:
            data = read_manifest_bytes(argument)
        except ManifestParseError as error:
            raise _Preflight("manifest", "MANIFEST_READ_FAILED", str(error), _issues(error)) from None
        try:
            manifest = load_task_manifest(data)
        except ManifestParseError as error:
            raise _Preflight("manifest", "MANIFEST_INVALID", str(error), _issues(error)) from None
        expected = Path(root) / "tasks" / f"{manifest.id}.yaml"
        absolute = Path(os.path.abspath(argument))
        if absolute != expected or absolute.is_symlink() or not absolute.is_file():
            raise _Preflight(
                "manifest",
                "MANIFEST_PATH_INVALID",
                f"the manifest must be the file tasks/{manifest.id}.yaml, not {self.options.manifest}",
            )
        if Path(os.path.realpath(absolute)) != expected:
            raise _Preflight(
                "manifest", "MANIFEST_PATH_INVALID", "the manifest's real path is not tasks/<id>.yaml"
            )
        return _Manifest(path=expected, digest=hashlib.sha256(data).hexdigest(), manifest=manifest)

    def read_base_manifest(self, git: Git, base_sha: str, task_id: str) -> TaskManifest:
        """The manifest the gate enforces: the base commit's ``tasks/<id>.yaml``, never the head's."""
        try:
            data = base_manifest_bytes(git, base_sha, task_id)
        except GitCheckError as error:
            raise _Preflight("manifest", "MANIFEST_READ_FAILED", error.message) from None
        except ExitGateError as error:
            raise _Preflight("manifest", error.code, error.message) from None
        try:
            manifest = load_task_manifest(data)
        except ManifestParseError as error:
            message = f"the base's tasks/{task_id}.yaml is invalid: {error}"
            raise _Preflight("manifest", "MANIFEST_INVALID", message, _issues(error)) from None
        if manifest.id != task_id:
            message = f"the base's tasks/{task_id}.yaml declares id {manifest.id!r}"
            raise _Preflight("manifest", "MANIFEST_PATH_INVALID", message)
        return manifest

    # -------------------------------------------------------------- git preflight

    def git_preflight(self, git: Git, task_id: str) -> tuple[GitState, BaseInfo]:
        branch = f"tasks/{task_id}"
        try:
            state = read_state(git)
            check_repository_safety(git)
            options = self.options
            if options.ci:
                head_ref = options.ci_head_ref or ""
                head_sha = options.head_sha or ""
                base = options.base or ""
                if head_ref != branch:
                    raise GitCheckError(
                        "GIT_CI_CONTEXT_INVALID", f"--ci-head-ref must be {branch}, got {head_ref!r}"
                    )
                if not is_full_oid(head_sha) or not is_full_oid(base):
                    raise GitCheckError(
                        "GIT_CI_CONTEXT_INVALID", "--head-sha and --base must be full object ids"
                    )
                if state.branch is not None and state.branch != f"refs/heads/{branch}":
                    raise GitCheckError(
                        "GIT_BRANCH_MISMATCH", f"checked-out branch {state.branch} is not {branch}"
                    )
                if state.head != head_sha:
                    raise GitCheckError(
                        "GIT_HEAD_MISMATCH", f"HEAD {state.head} is not --head-sha {head_sha}"
                    )
                base_ref = base
            else:
                if state.branch is None:
                    raise GitCheckError("GIT_DETACHED_UNVERIFIED", f"HEAD is detached; check out {branch}")
                if state.branch != f"refs/heads/{branch}":
                    raise GitCheckError("GIT_BRANCH_MISMATCH", f"HEAD is on {state.branch}, not {branch}")
                base_ref = local_base(git, options.base)
            base_info = resolve_base(git, base_ref, state.head)
        except GitCheckError as error:
            self.decision("git.branch", branch, "deny", error.message)
            raise _Preflight("git", error.code, error.message) from None
        self.decision("git.branch", branch, "allow", f"HEAD is verified as {branch}")
        return state, base_info

    # -------------------------------------------------------------- scope

    def violations(self, snapshot: Snapshot) -> list[str]:
        assert self.task is not None
        allowed = self.task.allowed_paths
        return [
            path
            for path in snapshot.policy_paths
            if _reserved(path) or is_protected(path) or not path_allowed(allowed, path)
        ]

    def content_violations(self, context: _Context, snapshot: Snapshot, scoped: list[str]) -> list[str]:
        """Changed paths inside the scope that still reach beyond it: attributes and links.

        Raises:
            GitCheckError: a failing git command while reading link targets.
        """
        assert self.task is not None
        outside = set(scoped)
        inside = [path for path in snapshot.policy_paths if path not in outside]
        found = [path for path in inside if is_attributes_file(path)]
        candidates = [path for path in inside if path not in found]
        for link in symbolic_links(context.git, context.root, candidates):
            reason = link_escape(context.root, link, self.task.allowed_paths)
            if reason is not None:
                self.escaping_links[link.path] = reason
                found.append(link.path)
        return found

    def scope_decision(self, subject: str, violations: list[str]) -> None:
        if violations:
            where = "outside allowed_paths"
            if any(is_protected(path) and not _reserved(path) for path in violations):
                where += " or under the gate's protected paths"
            if any(is_attributes_file(path) or path in self.escaping_links for path in violations):
                where += ", or .gitattributes and links that reach beyond the scope"
            self.decision(
                "workspace.path_scope", subject, "deny", f"{len(violations)} changed path(s) {where}"
            )
        else:
            self.decision(
                "workspace.path_scope", subject, "allow", "every changed path is inside allowed_paths"
            )


def _reserved(path: str) -> bool:
    """``tasks/runs/`` and the name itself: the gate's evidence, never a task's write."""
    return path.startswith(RUNS_DIR) or path == RUNS_DIR.rstrip("/")


def _scope_failures(run: _Run, violations: list[str]) -> None:
    """Pre-test step 6: protected paths first (the clearer reason), attributes, links, the rest."""
    assert run.task is not None
    protected = [path for path in violations if is_protected(path) and not _reserved(path)]
    attributes = [path for path in violations if path not in protected and is_attributes_file(path)]
    links = [path for path in violations if path in run.escaping_links and path not in protected]
    others = [path for path in violations if path not in {*protected, *attributes, *links}]
    if protected:
        own = f"tasks/{run.task.id}.yaml"
        message = (
            "changed paths the gate relies on, which no task may change whatever its allowed_paths "
            f"({', '.join(PROTECTED_PATHS)}): " + ", ".join(protected)
        )
        if own in protected:
            message += f"; {own} is this task's merged manifest, which a branch never edits"
        run.fail("policy", "PROTECTED_PATH_VIOLATION", message)
    if attributes:
        message = (
            "changed .gitattributes, which decide what git shows, exports and runs as filters,"
            " so no task may change one: " + ", ".join(attributes)
        )
        run.fail("policy", "GITATTRIBUTES_CHANGED", message)
    if links:
        message = "symbolic links that reach beyond the task's scope: " + "; ".join(
            run.escaping_links[path] for path in links
        )
        run.fail("policy", "SYMLINK_TARGET_VIOLATION", message)
    if others:
        message = "changed paths outside allowed_paths: " + ", ".join(others)
        run.fail("policy", "PATH_SCOPE_VIOLATION", message)


def _timeout(text: str) -> int | None:
    if not text.isascii() or not text.isdigit():
        return None
    value = int(text)
    return value if 1 <= value <= _MAX_TIMEOUT_MS else None


def _primary(failures: list[Failure], status: Status) -> Failure:
    if status == "blocked":
        return next(failure for failure in failures if failure.code in _BLOCKING or failure.stage == "git")
    return failures[0]


@dataclass(frozen=True, kw_only=True)
class _Context:
    root: str
    git: Git
    manifest: _Manifest
    state: GitState
    base: BaseInfo
    runs_baseline: dict[str, str]


def _prepare(run: _Run, root: str) -> _Context:
    """Steps 2 and 3: the manifest named by the argument, the git preflight, the base's manifest.

    The work tree's manifest names the task and must stay put during the run; the manifest the
    gate enforces (scope, permissions, title) is the base commit's copy.
    """
    git = Git(root)
    manifest_info: _Manifest | None = None
    try:
        manifest_info = run.read_manifest(root)
        run.task = manifest_info.manifest
        state, base = run.git_preflight(git, run.task.id)
        run.task = run.read_base_manifest(git, base.sha, run.task.id)
        runs_baseline = fingerprint_runs(root)
        try:
            again = run.read_manifest(root)
        except _Preflight as error:
            raise _Preflight("manifest", "MANIFEST_CHANGED_DURING_PREFLIGHT", error.args[0]) from None
        if again.path != manifest_info.path or again.digest != manifest_info.digest:
            raise _Preflight(
                "manifest", "MANIFEST_CHANGED_DURING_PREFLIGHT", "the manifest changed during preflight"
            )
    except _Preflight as error:
        error.manifest = manifest_info
        raise
    return _Context(
        root=root, git=git, manifest=manifest_info, state=state, base=base, runs_baseline=runs_baseline
    )


def _snapshot(run: _Run, context: _Context, subject: str) -> tuple[Snapshot | None, list[str]]:
    try:
        snapshot = capture_stable_snapshot(
            context.git, context.root, context.base, context.runs_baseline, context.state
        )
    except GitCheckError as error:
        run.decision("workspace.path_scope", subject, "deny", error.message)
        run.fail("git", error.code, error.message)
        return None, []
    violations = run.violations(snapshot)
    try:
        violations = sorted({*violations, *run.content_violations(context, snapshot, violations)})
    except GitCheckError as error:
        run.decision("workspace.path_scope", subject, "deny", error.message)
        run.fail("git", error.code, error.message)
        return None, []
    run.scope_decision(subject, violations)
    return snapshot, violations


def _authorise(run: _Run, timeout_ms: int | None) -> tuple[str, ...]:
    """Steps 7 to 9: the timeout, the exec policy and the argv; ``()`` when blocked."""
    assert run.task is not None
    command = run.options.test_command
    if timeout_ms is None:
        run.fail(
            "tests", "TEST_TIMEOUT_INVALID", f"--timeout-ms must be an integer from 1 to {_MAX_TIMEOUT_MS}"
        )
        return ()
    decision = decide(manifest_permissions(run.task), "process.exec", command)
    run.decision("process.exec", command, decision.effect, decision.reason)
    if decision.effect == "deny":
        run.fail("policy", "PROCESS_EXEC_DENIED", f"process.exec denies {command!r}: {decision.reason}")
        return ()
    if decision.effect == "ask":
        message = f"process.exec asks for {command!r}; the headless gate treats ask as blocked"
        run.fail("policy", "PROCESS_EXEC_APPROVAL_REQUIRED", message)
        return ()
    try:
        return parse_command(command)
    except CommandParseError as error:
        run.decision("process.exec", command, "deny", error.message)
        run.fail("tests", "TEST_COMMAND_INVALID", error.message)
        return ()


def _execute(
    run: _Run, context: _Context, argv: tuple[str, ...], timeout_ms: int
) -> tuple[TestsRecord, bool]:
    """Step 10: run the command; returns its record and whether cleanup was confirmed."""
    result = run_test_command(run.options.test_command, argv, cwd=context.root, timeout_ms=timeout_ms)
    tests = result.record
    if not result.spawned:
        message = result.spawn_error or "the test command did not start"
        run.fail("tests", "TEST_COMMAND_SPAWN_FAILED", message, event=True)
    elif result.timed_out:
        run.fail("tests", "TEST_COMMAND_TIMED_OUT", f"the test command exceeded {timeout_ms} ms", event=True)
    elif not tests.ok:
        run.fail(
            "tests", "TEST_COMMAND_FAILED", f"the test command exited with {tests.exit_code}", event=True
        )
    return tests, result.cleanup_confirmed


def _manifest_unchanged(run: _Run, context: _Context) -> bool:
    try:
        after = run.read_manifest(context.root)
    except _Preflight:
        return False
    return after.path == context.manifest.path and after.digest == context.manifest.digest


def _check_installation(options: RunOptions, root: str) -> None:
    """Step 1: the gate judging a checkout must not be that checkout's own code.

    Raises:
        _Preflight: ``GIT_CI_CONTEXT_INVALID`` for the development flag in CI mode;
            ``GATE_INSIDE_CHECKOUT`` when the gate runs from the checkout without the flag.
    """
    if options.ci and options.allow_gate_in_checkout:
        message = "--allow-gate-in-checkout is for local development; CI runs the base's gate"
        raise _Preflight("git", "GIT_CI_CONTEXT_INVALID", message)
    inside = gate_inside_checkout(root)
    if inside is not None and not options.allow_gate_in_checkout:
        message = (
            f"the gate runs from {inside}, inside the checkout it judges, so the branch wrote its judge; "
            "install the base's gate outside the checkout (.ci/exit-gate does), or pass "
            "--allow-gate-in-checkout for an advisory local run"
        )
        raise _Preflight("git", "GATE_INSIDE_CHECKOUT", message)


def run_gate(options: RunOptions) -> RunOutcome:
    """Run the exit gate once and write its evidence (exit-gate.md §5, §9)."""
    run = _Run(options)
    root = top_level(options.cwd)
    if root is None:
        unavailable = _Preflight("git", "GIT_REPOSITORY_UNAVAILABLE", "the cwd is not in a git repository")
        return _preflight_report(run, None, unavailable)
    try:
        _check_installation(options, root)
        context = _prepare(run, root)
    except _Preflight as error:
        return _preflight_report(run, root, error)
    task = run.task
    assert task is not None
    run.emit("task.updated", TaskUpdatedData(task_id=task.id, phase="running"))
    pre_test, violations = _snapshot(run, context, "pre-tests")
    _scope_failures(run, violations)
    post_test: Snapshot | None = None
    tests: TestsRecord | None = None
    timeout_ms = _timeout(options.timeout_ms)
    argv = _authorise(run, timeout_ms) if not run.failures else ()
    if argv and timeout_ms is not None:
        tests, cleanup_confirmed = _execute(run, context, argv, timeout_ms)
        post_test, post_violations = _snapshot(run, context, "post-tests")
        if post_test is not None and not _manifest_unchanged(run, context):
            message = "the manifest changed or became unreadable during the run"
            run.decision("workspace.path_scope", "post-test-manifest", "deny", message)
            run.fail("policy", "MANIFEST_MUTATED_DURING_RUN", message)
        if post_violations:
            message = "the test command changed paths outside allowed_paths or protected paths: " + ", ".join(
                post_violations
            )
            run.fail("policy", "POST_TEST_PATH_SCOPE_VIOLATION", message)
            violations = sorted(set(violations) | set(post_violations))
        if not cleanup_confirmed:
            message = "the test command's process group did not end"
            run.fail("tests", "TEST_PROCESS_GROUP_CLEANUP_FAILED", message)
    git_evidence: GitEvidence | None = None
    if pre_test is not None:
        git_evidence = GitEvidence(
            repository_root=root,
            mode="ci" if options.ci else "local",
            expected_branch=f"tasks/{task.id}",
            actual_branch=f"tasks/{task.id}" if context.state.branch is not None else UNSET,
            detached=context.state.branch is None,
            head_sha=context.state.head,
            base_ref=context.base.ref,
            base_sha=context.base.sha,
            merge_base_sha=context.base.merge_base,
            pre_test=pre_test,
            post_test=post_test if post_test is not None else UNSET,
        )
    changed = set(pre_test.policy_paths if pre_test else ()) | set(
        post_test.policy_paths if post_test else ()
    )
    policy = PolicySummary(
        changed_paths_ok=not violations, changed_paths=tuple(sorted(changed)), violations=tuple(violations)
    )
    return _finish(run, root, policy, tests, git_evidence)


# ------------------------------------------------------------------ finishing


def _status(failures: list[Failure]) -> Status:
    if not failures:
        return "passed"
    if any(failure.code in _BLOCKING or failure.stage == "git" for failure in failures):
        return "blocked"
    return "failed"


def _terminal_events(
    run: _Run, task_id: str, status: Status, note: str | None, report_path: str | None
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


def _persist(run: _Run, directory: Path | None, task_id: str | None) -> bool:
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


def _store_companion(run: _Run, root: str, task_id: str) -> tuple[Path | None, bool]:
    try:
        directory = prepare_run_directory(root, run.run_id)
    except EvidenceError as error:
        run.fail("evidence", "SESS_PERSIST_FAILED", str(error))
        return None, False
    return directory, _persist(run, directory, task_id)


@dataclass
class _ReportBuilder:
    """Builds the run report of a finished run, at whichever path it ends up written to."""

    run: _Run
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


def _finish(
    run: _Run, root: str, policy: PolicySummary, tests: TestsRecord | None, git: GitEvidence | None
) -> RunOutcome:
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


def _preflight_report(run: _Run, root: str | None, error: _Preflight) -> RunOutcome:
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
