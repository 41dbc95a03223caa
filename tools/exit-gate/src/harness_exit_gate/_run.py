"""The ``run`` algorithm (exit-gate.md §5): preflight, snapshots, the test command, evidence.

The steps live by job: the preflight in ``_preflight``, snapshots and the path scope in
``_scope``, the status and the evidence in ``_finish``; the run's state in ``_state``.
"""

from __future__ import annotations

from typing import Final

from msgspec import UNSET

from harness_exit_gate._command import parse_command
from harness_exit_gate._errors import CommandParseError
from harness_exit_gate._finish import finish, preflight_report
from harness_exit_gate._git import top_level
from harness_exit_gate._preflight import (
    PreflightFailed,
    RunContext,
    check_installation,
    manifest_unchanged,
    prepare,
)
from harness_exit_gate._process import run_test_command
from harness_exit_gate._report import GitEvidence, PolicySummary, Snapshot, TestsRecord
from harness_exit_gate._scope import scope_failures, snapshot
from harness_exit_gate._state import (
    DEFAULT_TEST_COMMAND,
    DEFAULT_TIMEOUT_MS,
    RunOptions,
    RunOutcome,
    RunState,
)
from harness_exit_gate.manifest import manifest_permissions
from harness_kernel.events import TaskUpdatedData
from harness_kernel.policy import decide

__all__ = ["DEFAULT_TEST_COMMAND", "DEFAULT_TIMEOUT_MS", "RunOptions", "RunOutcome", "run_gate"]

_MAX_TIMEOUT_MS: Final = 2_147_483_647


def run_gate(options: RunOptions) -> RunOutcome:
    """Run the exit gate once and write its evidence (exit-gate.md §5, §9)."""
    run = RunState(options)
    root = top_level(options.cwd)
    if root is None:
        unavailable = PreflightFailed(
            "git", "GIT_REPOSITORY_UNAVAILABLE", "the cwd is not in a git repository"
        )
        return preflight_report(run, None, unavailable)
    try:
        check_installation(options, root)
        context = prepare(run, root)
    except PreflightFailed as error:
        return preflight_report(run, root, error)
    task = run.task
    assert task is not None
    run.emit("task.updated", TaskUpdatedData(task_id=task.id, phase="running"))
    pre_test, violations = snapshot(run, context, "pre-tests")
    scope_failures(run, violations)
    post_test: Snapshot | None = None
    tests: TestsRecord | None = None
    timeout_ms = _timeout(options.timeout_ms)
    argv = _authorise(run, timeout_ms) if not run.failures else ()
    if argv and timeout_ms is not None:
        tests, cleanup_confirmed = _execute(run, context, argv, timeout_ms)
        post_test, post_violations = snapshot(run, context, "post-tests")
        if post_test is not None and not manifest_unchanged(run, context):
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
    return finish(run, root, policy, tests, git_evidence)


def _timeout(text: str) -> int | None:
    if not text.isascii() or not text.isdigit():
        return None
    value = int(text)
    return value if 1 <= value <= _MAX_TIMEOUT_MS else None


def _authorise(run: RunState, timeout_ms: int | None) -> tuple[str, ...]:
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
    run: RunState, context: RunContext, argv: tuple[str, ...], timeout_ms: int
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
