"""The ``run`` command against real git repositories (exit-gate.md §5 to §9)."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest
import trio

from harness_exit_gate import (
    main,
    validate_report_artifact,
    validate_run_preflight_report,
    validate_run_report,
)
from harness_kernel.events import serialize_event
from harness_kernel.store import SqliteSessionStore

if TYPE_CHECKING:
    from conftest import Repo, RepoFactory


def _failure_code(report: dict[str, object]) -> str:
    failure = report.get("failure") or report.get("error")
    assert isinstance(failure, dict)
    return cast("str", failure["code"])


def _changes(report: dict[str, object], snapshot: str = "preTest") -> list[dict[str, str]]:
    git = report["git"]
    assert isinstance(git, dict)
    return cast("list[dict[str, str]]", git[snapshot]["changes"])


def _event_types(report: dict[str, object]) -> list[str]:
    return [json.loads(wire)["type"] for wire in cast("list[str]", report["events"])]


async def _stored_events(database: Path, session_id: str) -> list[str]:
    async with SqliteSessionStore(database) as store:
        page = await store.read(session_id, limit=1000)
    return [serialize_event(item.event).decode() for item in page.events]


def test_clean_branch_passes_and_writes_report_and_companion(
    repo: Repo, repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    status, report, output = repo.gate("--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 0, output
    assert report["status"] == "passed"
    validate_run_report(report)
    validate_report_artifact(report)
    deliverables = cast("dict[str, object]", report["deliverables"])
    path = repo.root / cast("str", deliverables["reportPath"])
    assert path.read_text().startswith('{\n  "schema": "run-report/v2"')
    assert f"report: {deliverables['reportPath']}" in output
    assert deliverables["pullRequest"] == "branch: tasks/demo-task"
    database = path.parent / "session.sqlite"
    stored = trio.run(_stored_events, database, cast("str", deliverables["sessionId"]))
    assert stored == cast("list[str]", report["events"])[:-2]
    with sqlite3.connect(database) as connection:
        assert connection.execute("SELECT status FROM sessions").fetchall() == [("closed",)]
    assert _event_types(report)[-2:] == ["task.updated", "run.recorded"]
    assert repo.git("status", "--porcelain") == ""


def test_every_change_category_is_collected_and_checked(
    repo: Repo, repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.write("src/committed.py", "x\n")
    repo.commit()
    repo.write("src/staged.py", "staged\n")
    repo.git("add", "src/staged.py")
    repo.write("src/app.py", "VALUE = 2\n")
    repo.write("src/untracked.py", "x\n")
    repo.write("build/out.bin", "x\n")
    status, report, _ = repo.gate("--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch)
    found = {(change["origin"], change["status"], change["path"]) for change in _changes(report)}
    assert {
        ("committed", "A", "src/committed.py"),
        ("staged", "A", "src/staged.py"),
        ("unstaged", "M", "src/app.py"),
        ("untracked", "?", "src/untracked.py"),
        ("untracked", "!", "build/out.bin"),
        ("committed", "A", "src/feature.py"),
    } <= found
    assert status == 1
    assert _failure_code(report) == "PATH_SCOPE_VIOLATION"
    assert report["status"] == "blocked"
    assert cast("dict[str, object]", report["policy"])["violations"] == ["build/out.bin"]
    validate_run_report(report)


def test_renames_count_both_sides(
    repo: Repo, repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.git("mv", "docs/readme.md", "src/readme.md")
    repo.commit()
    status, report, _ = repo.gate("--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch)
    renames = [change for change in _changes(report) if change["status"].startswith("R")]
    assert renames == [
        {"origin": "committed", "status": "R100", "path": "src/readme.md", "oldPath": "docs/readme.md"}
    ]
    assert status == 1
    assert cast("dict[str, object]", report["policy"])["violations"] == ["docs/readme.md"]


def test_dirty_repository_outside_scope_is_blocked(
    repo: Repo, repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.write("docs/readme.md", "edited\n")
    status, report, output = repo.gate("--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert _failure_code(report) == "PATH_SCOPE_VIOLATION"
    assert "PATH_SCOPE_VIOLATION" in output


def test_manifest_edited_during_the_run_is_blocked(
    repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    command = f"{sys.executable} -c \"open('tasks/demo-task.yaml','a').write('#')\""
    repo = repos(commands={command: "allow"})
    status, report, _ = repo.gate("--test-cmd", command, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert report["status"] == "blocked"
    assert _failure_code(report) == "MANIFEST_MUTATED_DURING_RUN"
    validate_run_report(report)


def test_test_written_file_outside_scope_is_a_post_test_violation(
    repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    command = f"{sys.executable} -c \"open('docs/new.md','w').write('x')\""
    repo = repos(commands={command: "allow"})
    status, report, _ = repo.gate("--test-cmd", command, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert _failure_code(report) == "POST_TEST_PATH_SCOPE_VIOLATION"
    assert cast("dict[str, object]", report["policy"])["changedPaths"] == [
        "docs/new.md",
        "src/feature.py",
    ]
    validate_run_report(report)


def test_hanging_command_is_bounded_by_the_timeout(
    repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    command = sys.executable + " -c \"__import__('time').sleep(60)\""
    repo = repos(commands={command: "allow"})
    status, report, _ = repo.gate(
        "--test-cmd", command, "--timeout-ms", "300", capsys=capsys, monkeypatch=monkeypatch
    )
    assert status == 1
    assert report["status"] == "failed"
    assert _failure_code(report) == "TEST_COMMAND_TIMED_OUT"
    tests = cast("dict[str, object]", report["tests"])
    assert tests["exitCode"] == 1
    assert cast("int", tests["durationMs"]) < 10_000


def test_missing_command_fails_without_starting(
    repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = repos(commands={"no-such-command-for-the-gate": "allow"})
    status, report, _ = repo.gate(
        "--test-cmd", "no-such-command-for-the-gate", capsys=capsys, monkeypatch=monkeypatch
    )
    assert status == 1
    assert _failure_code(report) == "TEST_COMMAND_SPAWN_FAILED"
    assert "error" in _event_types(report)


def test_failing_command_reports_pytest_counts(
    repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = "__import__('sys').exit(print('===== 2 failed, 3 passed, 1 error in 0.10s =====') or 1)"
    command = f'{sys.executable} -c "{script}"'
    repo = repos(commands={command: "allow"})
    status, report, _ = repo.gate("--test-cmd", command, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    tests = cast("dict[str, object]", report["tests"])
    assert (tests["total"], tests["passed"], tests["failed"], tests["ok"]) == (6, 3, 3, False)
    assert _failure_code(report) == "TEST_COMMAND_FAILED"


@pytest.mark.parametrize(
    ("effect", "code"), [("ask", "PROCESS_EXEC_APPROVAL_REQUIRED"), ("deny", "PROCESS_EXEC_DENIED")]
)
def test_exec_policy_ask_and_deny_block_without_running(
    repos: RepoFactory,
    effect: str,
    code: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo = repos(commands={repos.passing: effect})
    status, report, _ = repo.gate("--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert report["status"] == "blocked"
    assert _failure_code(report) == code
    assert "tests" not in report


def test_invalid_timeout_and_command_are_blocked(
    repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = repos(commands={"echo 'open": "allow"})
    status, report, _ = repo.gate(
        "--test-cmd", repos.passing, "--timeout-ms", "0", capsys=capsys, monkeypatch=monkeypatch
    )
    assert (status, _failure_code(report)) == (1, "TEST_TIMEOUT_INVALID")
    status, report, _ = repo.gate("--test-cmd", "echo 'open", capsys=capsys, monkeypatch=monkeypatch)
    assert (status, _failure_code(report)) == (1, "TEST_COMMAND_INVALID")


def _preflight(output: str) -> dict[str, object]:
    body, _, _ = output.rpartition("\n}\n")
    return json.loads(body + "\n}\n")


def test_detached_head_writes_a_preflight_report(
    repo: Repo, repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.git("checkout", "-q", "--detach")
    status, report, _ = repo.gate("--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert report["schema"] == "run-preflight-report/v1"
    assert _failure_code(report) == "GIT_DETACHED_UNVERIFIED"
    validate_run_preflight_report(report)
    deliverables = cast("dict[str, object]", report["deliverables"])
    assert (repo.root / cast("str", deliverables["reportPath"])).is_file()


def test_other_branch_and_invalid_manifest_are_preflight_failures(
    repo: Repo, repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.git("checkout", "-q", "-b", "tasks/other")
    status, report, _ = repo.gate("--test-cmd", repos.passing, capsys=capsys, monkeypatch=monkeypatch)
    assert (status, _failure_code(report)) == (1, "GIT_BRANCH_MISMATCH")
    repo.write(repo.manifest, "id: demo-task\ntitle: yes\n")
    status, report, _ = repo.gate(capsys=capsys, monkeypatch=monkeypatch)
    assert (status, _failure_code(report)) == (1, "MANIFEST_INVALID")
    error = cast("dict[str, object]", report["error"])
    assert {"path": "title", "message": error["issues"][0]["message"]} in error["issues"]  # type: ignore[index]


def test_ci_mode_checks_head_and_base(
    repo: Repo, repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    head = repo.git("rev-parse", "HEAD")
    base = repo.git("rev-parse", "main")
    options = ("--test-cmd", repos.passing, "--ci-head-ref", "tasks/demo-task", "--base", base)
    status, report, output = repo.gate(*options, "--head-sha", head, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 0, output
    assert _event_types(report) == [
        "policy.decision",
        "task.updated",
        "policy.decision",
        "policy.decision",
        "policy.decision",
        "task.updated",
        "run.recorded",
    ]
    status, report, _ = repo.gate(*options, "--head-sha", base, capsys=capsys, monkeypatch=monkeypatch)
    assert (status, _failure_code(report)) == (1, "GIT_HEAD_MISMATCH")
    status, report, _ = repo.gate(*options, capsys=capsys, monkeypatch=monkeypatch)
    assert (status, _failure_code(report)) == (1, "GIT_CI_CONTEXT_INVALID")


def test_no_repository_falls_back_to_a_temp_preflight_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", "tasks/x.yaml"]) == 1
    report = _preflight(capsys.readouterr().out)
    assert _failure_code(report) == "GIT_REPOSITORY_UNAVAILABLE"
    path = Path(cast("str", cast("dict[str, object]", report["deliverables"])["reportPath"]))
    assert path.is_absolute()
    assert path.is_file()


def test_a_git_diff_star_rule_admits_a_git_diff_of_a_path(
    repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Decision 041: process.exec patterns are command globs, so "git diff*" admits a
    # command whose argument holds a "/". On the path dialect the "*" stopped at the "/"
    # and the "*": deny fallback blocked the run (PROCESS_EXEC_DENIED).
    repo = repos(commands={"git diff*": "allow"})
    command = "git diff main -- src/feature.py"
    status, report, output = repo.gate("--test-cmd", command, capsys=capsys, monkeypatch=monkeypatch)
    decisions = [json.loads(wire)["data"] for wire in cast("list[str]", report["events"])]
    policy = [
        (decision["subject"], decision["effect"])
        for decision in decisions
        if decision.get("action") == "process.exec"
    ]
    assert policy == [(command, "allow")], output
    assert report["status"] == "passed", output
    assert status == 0
