"""Steps 1 to 3 of ``run`` (exit-gate.md §5): the gate's installation, the manifest, the git preflight.

A preflight that fails stops the run before any snapshot: :class:`PreflightFailed` carries
the failure to the preflight report.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness_exit_gate._errors import ExitGateError, GitCheckError
from harness_exit_gate._git import (
    BaseInfo,
    Git,
    GitState,
    check_repository_safety,
    fingerprint_runs,
    is_full_oid,
    local_base,
    read_state,
    resolve_base,
)
from harness_exit_gate._manifest_file import read_manifest_bytes
from harness_exit_gate._report import Issue
from harness_exit_gate._state import RunOptions, RunState
from harness_exit_gate._trust import base_manifest_bytes, gate_inside_checkout
from harness_exit_gate.manifest import ManifestParseError, TaskManifest, load_task_manifest

__all__ = [
    "ManifestInfo",
    "PreflightFailed",
    "RunContext",
    "check_installation",
    "manifest_unchanged",
    "prepare",
]


class PreflightFailed(Exception):
    """A preflight step failed: the run ends with a preflight report, before any snapshot."""

    def __init__(
        self, stage: Literal["manifest", "git"], code: str, message: str, issues: tuple[Issue, ...] = ()
    ):
        super().__init__(message)
        self.stage: Literal["manifest", "git"] = stage
        self.code = code
        self.issues = issues
        self.manifest: ManifestInfo | None = None


def _issues(error: ManifestParseError) -> tuple[Issue, ...]:
    return tuple(Issue(path=issue.path, message=issue.message) for issue in error.issues)


@dataclass
class ManifestInfo:
    """The work tree's manifest as read: where it is, its digest and what it says."""

    path: Path
    digest: str
    manifest: TaskManifest


@dataclass(frozen=True, kw_only=True)
class RunContext:
    """What the preflight established and the later steps rely on."""

    root: str
    git: Git
    manifest: ManifestInfo
    state: GitState
    base: BaseInfo
    runs_baseline: dict[str, str]


def check_installation(options: RunOptions, root: str) -> None:
    """Step 1: the gate judging a checkout must not be that checkout's own code.

    Raises:
        PreflightFailed: ``GIT_CI_CONTEXT_INVALID`` for the development flag in CI mode;
            ``GATE_INSIDE_CHECKOUT`` when the gate runs from the checkout without the flag.
    """
    if options.ci and options.allow_gate_in_checkout:
        message = "--allow-gate-in-checkout is for local development; CI runs the base's gate"
        raise PreflightFailed("git", "GIT_CI_CONTEXT_INVALID", message)
    inside = gate_inside_checkout(root)
    if inside is not None and not options.allow_gate_in_checkout:
        message = (
            f"the gate runs from {inside}, inside the checkout it judges, so the branch wrote its judge; "
            "install the base's gate outside the checkout (.ci/exit-gate does), or pass "
            "--allow-gate-in-checkout for an advisory local run"
        )
        raise PreflightFailed("git", "GATE_INSIDE_CHECKOUT", message)


def prepare(run: RunState, root: str) -> RunContext:
    """Steps 2 and 3: the manifest named by the argument, the git preflight, the base's manifest.

    The work tree's manifest names the task and must stay put during the run; the manifest the
    gate enforces (scope, permissions, title) is the base commit's copy.

    Raises:
        PreflightFailed: a step failed; ``manifest`` holds the work tree's manifest if it was read.
    """
    git = Git(root)
    manifest_info: ManifestInfo | None = None
    try:
        manifest_info = read_manifest(run.options, root)
        run.task = manifest_info.manifest
        state, base = git_preflight(run, git, run.task.id)
        run.task = read_base_manifest(git, base.sha, run.task.id)
        runs_baseline = fingerprint_runs(root)
        try:
            again = read_manifest(run.options, root)
        except PreflightFailed as error:
            raise PreflightFailed("manifest", "MANIFEST_CHANGED_DURING_PREFLIGHT", error.args[0]) from None
        if again.path != manifest_info.path or again.digest != manifest_info.digest:
            raise PreflightFailed(
                "manifest", "MANIFEST_CHANGED_DURING_PREFLIGHT", "the manifest changed during preflight"
            )
    except PreflightFailed as error:
        error.manifest = manifest_info
        raise
    return RunContext(
        root=root, git=git, manifest=manifest_info, state=state, base=base, runs_baseline=runs_baseline
    )


def manifest_unchanged(run: RunState, context: RunContext) -> bool:
    """Whether the work tree's manifest is still the file the preflight read."""
    try:
        after = read_manifest(run.options, context.root)
    except PreflightFailed:
        return False
    return after.path == context.manifest.path and after.digest == context.manifest.digest


def read_manifest(options: RunOptions, root: str) -> ManifestInfo:
    """The manifest the argument names, which must be the file ``tasks/<id>.yaml`` under ``root``."""
    argument = Path(os.path.realpath(options.cwd)) / options.manifest
    try:
        data = read_manifest_bytes(argument)
    except ManifestParseError as error:
        raise PreflightFailed("manifest", "MANIFEST_READ_FAILED", str(error), _issues(error)) from None
    try:
        manifest = load_task_manifest(data)
    except ManifestParseError as error:
        raise PreflightFailed("manifest", "MANIFEST_INVALID", str(error), _issues(error)) from None
    expected = Path(root) / "tasks" / f"{manifest.id}.yaml"
    absolute = Path(os.path.abspath(argument))
    if absolute != expected or absolute.is_symlink() or not absolute.is_file():
        raise PreflightFailed(
            "manifest",
            "MANIFEST_PATH_INVALID",
            f"the manifest must be the file tasks/{manifest.id}.yaml, not {options.manifest}",
        )
    if Path(os.path.realpath(absolute)) != expected:
        raise PreflightFailed(
            "manifest", "MANIFEST_PATH_INVALID", "the manifest's real path is not tasks/<id>.yaml"
        )
    return ManifestInfo(path=expected, digest=hashlib.sha256(data).hexdigest(), manifest=manifest)


def read_base_manifest(git: Git, base_sha: str, task_id: str) -> TaskManifest:
    """The manifest the gate enforces: the base commit's ``tasks/<id>.yaml``, never the head's."""
    try:
        data = base_manifest_bytes(git, base_sha, task_id)
    except GitCheckError as error:
        raise PreflightFailed("manifest", "MANIFEST_READ_FAILED", error.message) from None
    except ExitGateError as error:
        raise PreflightFailed("manifest", error.code, error.message) from None
    try:
        manifest = load_task_manifest(data)
    except ManifestParseError as error:
        message = f"the base's tasks/{task_id}.yaml is invalid: {error}"
        raise PreflightFailed("manifest", "MANIFEST_INVALID", message, _issues(error)) from None
    if manifest.id != task_id:
        message = f"the base's tasks/{task_id}.yaml declares id {manifest.id!r}"
        raise PreflightFailed("manifest", "MANIFEST_PATH_INVALID", message)
    return manifest


def git_preflight(run: RunState, git: Git, task_id: str) -> tuple[GitState, BaseInfo]:
    """The checked-out branch is ``tasks/<id>`` (or CI's head), and the base resolves."""
    branch = f"tasks/{task_id}"
    try:
        state = read_state(git)
        check_repository_safety(git)
        options = run.options
        if options.ci:
            head_ref = options.ci_head_ref or ""
            head_sha = options.head_sha or ""
            base = options.base or ""
            if head_ref != branch:
                raise GitCheckError(
                    "GIT_CI_CONTEXT_INVALID", f"--ci-head-ref must be {branch}, got {head_ref!r}"
                )
            if not is_full_oid(head_sha) or not is_full_oid(base):
                raise GitCheckError("GIT_CI_CONTEXT_INVALID", "--head-sha and --base must be full object ids")
            if state.branch is not None and state.branch != f"refs/heads/{branch}":
                raise GitCheckError(
                    "GIT_BRANCH_MISMATCH", f"checked-out branch {state.branch} is not {branch}"
                )
            if state.head != head_sha:
                raise GitCheckError("GIT_HEAD_MISMATCH", f"HEAD {state.head} is not --head-sha {head_sha}")
            base_ref = base
        else:
            if state.branch is None:
                raise GitCheckError("GIT_DETACHED_UNVERIFIED", f"HEAD is detached; check out {branch}")
            if state.branch != f"refs/heads/{branch}":
                raise GitCheckError("GIT_BRANCH_MISMATCH", f"HEAD is on {state.branch}, not {branch}")
            base_ref = local_base(git, options.base)
        base_info = resolve_base(git, base_ref, state.head)
    except GitCheckError as error:
        run.decision("git.branch", branch, "deny", error.message)
        raise PreflightFailed("git", error.code, error.message) from None
    run.decision("git.branch", branch, "allow", f"HEAD is verified as {branch}")
    return state, base_info
