"""Manifest path refusals, git hardening (exit-gate.md §6.2, §6.3) and the evidence fallbacks (§9)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

from harness_exit_gate import RunReportError, validate_run_preflight_report, validate_run_report
from harness_exit_gate._git import Git, capture_snapshot
from harness_exit_gate._report import Snapshot

if TYPE_CHECKING:
    from conftest import Repo, RepoFactory


# Every test runs real gates (about 45 git processes each): outside the inner loop.
pytestmark = pytest.mark.slow


def _failure(report: dict[str, object]) -> dict[str, object]:
    failure = report.get("failure") or report.get("error")
    assert isinstance(failure, dict)
    return cast("dict[str, object]", failure)


def _codes(report: dict[str, object]) -> list[str]:
    return [cast("str", failure["code"]) for failure in cast("list[dict[str, object]]", report["failures"])]


def _deliverables(report: dict[str, object]) -> dict[str, object]:
    return cast("dict[str, object]", report["deliverables"])


def _events(report: dict[str, object]) -> list[dict[str, object]]:
    return [json.loads(wire) for wire in cast("list[str]", report["events"])]


_PASSING = f"{sys.executable} -c pass"


def _python(script: str) -> str:
    """A test command running ``script``, which must avoid the characters parse_command refuses."""
    return f'{sys.executable} -c "{script}"'


def _assert_preflight(report: dict[str, object], stage: str, code: str) -> None:
    assert report["schema"] == "run-preflight-report/v1"
    assert (_failure(report)["stage"], _failure(report)["code"]) == (stage, code)
    validate_run_preflight_report(report)


def _assert_blocked_by_git(report: dict[str, object], code: str) -> None:
    assert report["status"] == "blocked"
    assert (_failure(report)["stage"], _failure(report)["code"]) == ("git", code)
    assert "error" in [event["type"] for event in _events(report)]
    validate_run_report(report)


# ------------------------------------------------------------------ manifest path (§5 step 2)


@pytest.mark.parametrize("argument", ["tasks/copy.yaml", "tasks/nested/demo-task.yaml", "link.yaml"])
def test_a_manifest_outside_tasks_id_yaml_is_refused_without_trusting_its_identity(
    repo: Repo,
    repos: RepoFactory,
    argument: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = (repo.root / repo.manifest).read_text()
    repo.write("tasks/copy.yaml", text)
    repo.write("tasks/nested/demo-task.yaml", text)
    (repo.root / "link.yaml").symlink_to(repo.root / repo.manifest)
    status, report, _ = repo.gate(
        "--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch, manifest=argument
    )
    assert status == 1
    _assert_preflight(report, "manifest", "MANIFEST_PATH_INVALID")
    assert "task" not in report
    assert "branch" not in report


def test_a_symlinked_manifest_is_refused(
    repo: Repo, repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = repo.root / repo.manifest
    repo.write("docs/real.yaml", manifest.read_text())
    manifest.unlink()
    manifest.symlink_to(repo.root / "docs" / "real.yaml")
    status, report, _ = repo.gate("--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    _assert_preflight(report, "manifest", "MANIFEST_PATH_INVALID")


def test_a_symlinked_tasks_directory_is_refused_and_the_preflight_report_falls_back_to_temp(
    repo: Repo, repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo.root / "tasks").rename(repo.root / "real-tasks")
    (repo.root / "tasks").symlink_to(repo.root / "real-tasks")
    status, report, output = repo.gate("--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    _assert_preflight(report, "manifest", "MANIFEST_PATH_INVALID")
    path = Path(cast("str", _deliverables(report)["reportPath"]))
    assert path.is_absolute()
    assert path.name == "preflight.json"
    assert json.loads(path.read_text()) == report
    assert f"report: {path}" in output
    assert not (repo.root / "real-tasks" / "runs").exists()


# ------------------------------------------------------------------ refusals at preflight (§6.2)


def _replace_ref(repo: Repo) -> None:
    repo.git("replace", "HEAD", "main")


def _packed_replace_ref(repo: Repo) -> None:
    _replace_ref(repo)
    repo.git("pack-refs", "--all")


def _gitlink_in_index(repo: Repo) -> None:
    commit = repo.git("rev-parse", "main")
    repo.git("update-index", "--add", "--cacheinfo", f"160000,{commit},src/vendored")


def _gitlink_in_head(repo: Repo) -> None:
    _gitlink_in_index(repo)
    repo.git("commit", "-q", "-m", "vendor a submodule")


def _assume_unchanged(repo: Repo) -> None:
    repo.git("update-index", "--assume-unchanged", "src/app.py")


def _skip_worktree(repo: Repo) -> None:
    repo.git("update-index", "--skip-worktree", "src/app.py")


def _unmerged(repo: Repo) -> None:
    repo.git("checkout", "-q", "-b", "side")
    repo.write("src/app.py", "VALUE = 'side'\n")
    repo.commit()
    repo.git("checkout", "-q", f"tasks/{repo.task_id}")
    repo.write("src/app.py", "VALUE = 'task'\n")
    repo.commit()
    with pytest.raises(subprocess.CalledProcessError):
        repo.git("merge", "-q", "side")


@pytest.mark.parametrize(
    ("setup", "code"),
    [
        pytest.param(_replace_ref, "GIT_REPLACE_OBJECTS_UNSAFE", id="replace-ref"),
        pytest.param(_packed_replace_ref, "GIT_REPLACE_OBJECTS_UNSAFE", id="packed-replace-ref"),
        pytest.param(_gitlink_in_head, "GIT_SUBMODULE_UNSUPPORTED", id="gitlink-in-head"),
        pytest.param(_gitlink_in_index, "GIT_SUBMODULE_UNSUPPORTED", id="gitlink-in-index"),
        pytest.param(_assume_unchanged, "GIT_INDEX_FLAGS_UNSAFE", id="assume-unchanged"),
        pytest.param(_skip_worktree, "GIT_INDEX_FLAGS_UNSAFE", id="skip-worktree"),
        pytest.param(_unmerged, "GIT_DIFF_INVALID", id="unmerged"),
    ],
)
def test_unsafe_repository_state_is_refused_at_preflight_without_touching_it(
    repo: Repo,
    setup: Callable[[Repo], None],
    code: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    setup(repo)
    index_before = repo.git("ls-files", "-s", "-v")
    status, report, output = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    _assert_preflight(report, "git", code)
    decision = _events(report)[0]
    assert decision["type"] == "policy.decision"
    data = cast("dict[str, object]", decision["data"])
    assert (data["action"], data["effect"]) == ("git.branch", "deny")
    assert f"{code}: " in output
    assert repo.git("ls-files", "-s", "-v") == index_before


# ------------------------------------------------------------------ refusals after the tests (§6.3)

_COMMIT = "git -c user.name=Gate -c user.email=gate@example.invalid commit -q --allow-empty -m moved"


@pytest.mark.parametrize(
    ("command", "code"),
    [
        pytest.param("git update-index --assume-unchanged src/app.py", "GIT_INDEX_FLAGS_UNSAFE", id="flag"),
        pytest.param("git update-index --skip-worktree src/app.py", "GIT_INDEX_FLAGS_UNSAFE", id="skip"),
        pytest.param("git config gate.touched yes", "GIT_METADATA_CHANGED", id="metadata"),
        pytest.param("git checkout -q -b tasks/elsewhere", "GIT_BRANCH_CHANGED", id="branch"),
        pytest.param(_COMMIT, "GIT_HEAD_CHANGED", id="head"),
        # A relative core.worktree is resolved from .git, so this moves the top level to src/.
        pytest.param("git config core.worktree ../src", "GIT_REPOSITORY_CHANGED", id="top-level"),
    ],
)
def test_a_test_command_that_moves_git_state_is_blocked_after_the_run(
    repos: RepoFactory,
    command: str,
    code: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = repos(commands={command: "allow"})
    status, report, _ = repo.gate("--test-cmd", command, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    _assert_blocked_by_git(report, code)
    assert cast("dict[str, object]", report["tests"])["ok"] is True
    assert "postTest" not in cast("dict[str, object]", report["git"])
    post = [event for event in _events(report) if cast("dict[str, object]", event["data"]).get("subject")]
    scope = [cast("dict[str, object]", event["data"]) for event in post]
    assert {"subject": "post-tests", "effect": "deny"}.items() <= scope[-1].items()


def test_changes_that_move_between_the_two_captures_are_unstable(
    repo: Repo, repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    captures: list[Snapshot] = []

    def capture_then_write(git: Git, root: str, merge_base: str, runs_baseline: dict[str, str]) -> Snapshot:
        captures.append(capture_snapshot(git, root, merge_base, runs_baseline))
        repo.write(f"src/late{len(captures)}.py", "x\n")
        return captures[-1]

    monkeypatch.setattr("harness_exit_gate._git.capture_snapshot", capture_then_write)
    status, report, _ = repo.gate("--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    _assert_blocked_by_git(report, "GIT_DIFF_UNSTABLE")
    assert len(captures) == 2
    assert "tests" not in report
    assert "git" not in report


@pytest.mark.parametrize(
    "name", [b"src/line\nbreak.py", b"src/tab\tname.py", b"src/latin1-\xff.py"], ids=["lf", "tab", "bytes"]
)
def test_untracked_paths_with_control_characters_or_invalid_utf8_are_refused(
    repo: Repo,
    repos: RepoFactory,
    name: bytes,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    Path(os.fsdecode(os.path.join(os.fsencode(repo.root), name))).write_bytes(b"x\n")
    status, report, _ = repo.gate("--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    _assert_blocked_by_git(report, "GIT_DIFF_INVALID")


def test_inherited_git_variables_cannot_redirect_the_gate(
    repo: Repo, repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = repo.root.parent / "decoy"
    elsewhere.mkdir()
    monkeypatch.setenv("GIT_DIR", str(elsewhere))
    monkeypatch.setenv("GIT_WORK_TREE", str(elsewhere))
    monkeypatch.setenv("GIT_INDEX_FILE", str(elsewhere / "index"))
    monkeypatch.setenv("GIT_REPLACE_REF_BASE", "refs/heads/")
    status, report, output = repo.gate("--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 0, output
    assert cast("dict[str, object]", report["git"])["repositoryRoot"] == str(repo.root)


# ------------------------------------------------------------------ tasks/runs/ (§6.3, §9.1)


def test_earlier_evidence_is_baseline_and_touching_it_is_a_violation(
    repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    glob = "__import__('glob').glob"
    tamper = _python(
        f"[__import__('os').remove(p) for p in {glob}('tasks/runs/*/report.json')],"
        f" [open(p, 'ab').write(b'x') for p in {glob}('tasks/runs/*/session.sqlite')],"
        " open('tasks/runs/forged.json', 'w').write('{}')"
    )
    repo = repos(commands={repos.passing: "allow", tamper: "allow"})
    first_status, first, _ = repo.gate("--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch)
    second_status, _, output = repo.gate("--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch)
    assert (first_status, second_status) == (0, 0), output
    evidence = f"tasks/runs/{first['runId']}"
    status, report, _ = repo.gate("--test-cmd", tamper, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert _failure(report)["code"] == "POST_TEST_PATH_SCOPE_VIOLATION"
    git = cast("dict[str, dict[str, object]]", report["git"])
    assert cast("list[object]", git["preTest"]["changes"]) == [
        {"origin": "committed", "status": "A", "path": "src/feature.py"}
    ]
    post = {
        (change["status"], change["path"])
        for change in cast("list[dict[str, str]]", git["postTest"]["changes"])
        if change["path"].startswith("tasks/runs/")
    }
    assert {
        ("D!", f"{evidence}/report.json"),
        ("!", f"{evidence}/session.sqlite"),
        ("!", "tasks/runs/forged.json"),
    } <= post
    violations = cast("list[str]", cast("dict[str, object]", report["policy"])["violations"])
    assert {path for _, path in post} == set(violations)
    validate_run_report(report)


def test_the_runs_directory_itself_is_reserved_even_when_globs_match(
    repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    command = _python("open('tasks/runs', 'w').write('not a directory')")
    repo = repos(allowed=("src/**", "tasks/**"), commands={command: "allow"})
    status, report, _ = repo.gate("--test-cmd", command, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert report["status"] == "blocked"
    assert _failure(report)["code"] == "POST_TEST_PATH_SCOPE_VIOLATION"
    assert cast("dict[str, object]", report["policy"])["violations"] == ["tasks/runs"]
    assert Path(cast("str", _deliverables(report)["reportPath"])).is_absolute()
    validate_run_report(report)


# ------------------------------------------------------------------ report fallbacks (§9.3)


def _symlink_runs_directory(repo: Repo) -> Path:
    """Point an ignored ``tasks/runs`` at an outside directory that must stay empty."""
    outside = repo.root.parent / f"{repo.root.name}-outside-runs"
    outside.mkdir()
    (repo.root / "tasks" / "runs").symlink_to(outside)
    with (repo.root / ".git" / "info" / "exclude").open("a") as exclude:
        exclude.write("/tasks/runs\n")
    return outside


def test_a_symlinked_runs_directory_is_refused_and_the_report_falls_back_to_temp(
    repo: Repo, repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = _symlink_runs_directory(repo)
    status, report, output = repo.gate("--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert report["status"] == "failed"
    assert _codes(report) == ["SESS_PERSIST_FAILED", "REPORT_WRITE_FAILED"]
    deliverables = _deliverables(report)
    path = Path(cast("str", deliverables["reportPath"]))
    assert path.is_absolute()
    assert path.parent.name.startswith("harness-exit-gate-runs-")
    assert path.read_bytes().decode() + "report: " in output + "report: "
    assert (deliverables["reportWritten"], deliverables["artifacts"]) == (True, [])
    assert "sessionId" not in deliverables
    recorded = [event for event in _events(report) if event["type"] == "run.recorded"]
    assert cast("dict[str, object]", recorded[0]["data"])["reportPath"] == str(path)
    assert list(outside.iterdir()) == []
    validate_run_report(report)


def test_when_the_fallback_fails_too_the_report_is_printed_but_not_recorded(
    repo: Repo, repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_temp_directory(*, prefix: str) -> str:
        raise PermissionError(13, "Permission denied", prefix)

    _symlink_runs_directory(repo)
    monkeypatch.setattr(tempfile, "mkdtemp", no_temp_directory)
    status, report, output = repo.gate("--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert _codes(report) == ["SESS_PERSIST_FAILED", "REPORT_WRITE_FAILED", "REPORT_FALLBACK_WRITE_FAILED"]
    deliverables = _deliverables(report)
    intended = f"tasks/runs/{report['runId']}/report.json"
    assert (deliverables["reportWritten"], deliverables["reportPath"]) == (False, intended)
    assert "run.recorded" not in [event["type"] for event in _events(report)]
    assert f"report was not written; intended path: {intended}" in output
    validate_run_report(report)


def test_a_report_that_fails_validation_is_rebuilt_without_its_evidence_blocks(
    repo: Repo, repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[bool] = []

    def reject_first(report: dict[str, object] | str | bytes) -> object:
        calls.append(True)
        if len(calls) == 1:
            raise RunReportError("invalid run report: refused for the test")
        return validate_run_report(report)

    monkeypatch.setattr("harness_exit_gate._finish.validate_run_report", reject_first)
    status, report, _ = repo.gate("--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert report["status"] == "failed"
    assert _failure(report) == {
        "stage": "report",
        "code": "REPORT_CONSTRUCTION_FAILED",
        "message": "invalid run report: refused for the test",
    }
    assert not {"tests", "builder", "git", "modelUsage"} & report.keys()
    assert (repo.root / cast("str", _deliverables(report)["reportPath"])).is_file()
    validate_run_report(report)
