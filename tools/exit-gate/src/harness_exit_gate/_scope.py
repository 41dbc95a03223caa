"""The changed paths of ``run`` (exit-gate.md §5, steps 4 to 6 and after the tests): snapshots
and the path scope, judged against the base's ``allowed_paths`` and the protected paths."""

from __future__ import annotations

from harness_exit_gate._errors import GitCheckError
from harness_exit_gate._git import RUNS_DIR, capture_stable_snapshot, symbolic_links
from harness_exit_gate._preflight import RunContext
from harness_exit_gate._report import Snapshot
from harness_exit_gate._state import RunState
from harness_exit_gate._trust import PROTECTED_PATHS, is_attributes_file, is_protected, link_escape
from harness_kernel.policy import path_allowed

__all__ = ["scope_failures", "snapshot"]


def snapshot(run: RunState, context: RunContext, subject: str) -> tuple[Snapshot | None, list[str]]:
    """A stable snapshot of the changes and the paths among them that break the scope.

    A failing git command is recorded as a failure of the run; the snapshot is then ``None``.
    """
    try:
        captured = capture_stable_snapshot(
            context.git, context.root, context.base, context.runs_baseline, context.state
        )
    except GitCheckError as error:
        run.decision("workspace.path_scope", subject, "deny", error.message)
        run.fail("git", error.code, error.message)
        return None, []
    violations = _violations(run, captured)
    try:
        violations = sorted({*violations, *_content_violations(run, context, captured, violations)})
    except GitCheckError as error:
        run.decision("workspace.path_scope", subject, "deny", error.message)
        run.fail("git", error.code, error.message)
        return None, []
    _scope_decision(run, subject, violations)
    return captured, violations


def scope_failures(run: RunState, violations: list[str]) -> None:
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


def _reserved(path: str) -> bool:
    """``tasks/runs/`` and the name itself: the gate's evidence, never a task's write."""
    return path.startswith(RUNS_DIR) or path == RUNS_DIR.rstrip("/")


def _violations(run: RunState, captured: Snapshot) -> list[str]:
    assert run.task is not None
    allowed = run.task.allowed_paths
    return [
        path
        for path in captured.policy_paths
        if _reserved(path) or is_protected(path) or not path_allowed(allowed, path)
    ]


def _content_violations(
    run: RunState, context: RunContext, captured: Snapshot, scoped: list[str]
) -> list[str]:
    """Changed paths inside the scope that still reach beyond it: attributes and links.

    Raises:
        GitCheckError: a failing git command while reading link targets.
    """
    assert run.task is not None
    outside = set(scoped)
    inside = [path for path in captured.policy_paths if path not in outside]
    found = [path for path in inside if is_attributes_file(path)]
    candidates = [path for path in inside if path not in found]
    for link in symbolic_links(context.git, context.root, candidates):
        reason = link_escape(context.root, link, run.task.allowed_paths)
        if reason is not None:
            run.escaping_links[link.path] = reason
            found.append(link.path)
    return found


def _scope_decision(run: RunState, subject: str, violations: list[str]) -> None:
    if violations:
        where = "outside allowed_paths"
        if any(is_protected(path) and not _reserved(path) for path in violations):
            where += " or under the gate's protected paths"
        if any(is_attributes_file(path) or path in run.escaping_links for path in violations):
            where += ", or .gitattributes and links that reach beyond the scope"
        run.decision("workspace.path_scope", subject, "deny", f"{len(violations)} changed path(s) {where}")
    else:
        run.decision("workspace.path_scope", subject, "allow", "every changed path is inside allowed_paths")
