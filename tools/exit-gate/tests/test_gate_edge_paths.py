"""Edge paths of ``run``: base trust, the preflight re-check, group cleanup, SQLite links (§5 to §9)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest
import trio

from harness_exit_gate import validate_run_preflight_report, validate_run_report
from harness_exit_gate._evidence import prepare_run_directory
from harness_exit_gate._git import fingerprint_runs
from harness_kernel.events import serialize_event
from harness_kernel.store import SqliteSessionStore

if TYPE_CHECKING:
    from conftest import Repo, RepoFactory


# Every test runs real gates (about 45 git processes each): outside the inner loop.
pytestmark = pytest.mark.slow
_PASSING = f"{sys.executable} -c pass"
_PREFLIGHT_EVENTS = ["policy.decision", "error"]
_CLEAN_RUN_EVENTS = [
    "policy.decision",
    "task.updated",
    "policy.decision",
    "policy.decision",
    "policy.decision",
    "task.updated",
    "run.recorded",
]


@pytest.fixture(autouse=True)
def _no_pull_request_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HARNESS_PULL_REQUEST_URL", raising=False)


def _failure(report: dict[str, object]) -> dict[str, object]:
    failure = report.get("failure") or report.get("error")
    assert isinstance(failure, dict)
    return cast("dict[str, object]", failure)


def _deliverables(report: dict[str, object]) -> dict[str, object]:
    return cast("dict[str, object]", report["deliverables"])


def _events(report: dict[str, object]) -> list[dict[str, object]]:
    return [json.loads(wire) for wire in cast("list[str]", report["events"])]


def _data(event: dict[str, object]) -> dict[str, object]:
    return cast("dict[str, object]", event["data"])


def _git_state(repo: Repo) -> tuple[str, str, str]:
    """Refs, the checked-out branch and the worktree status: what the gate must never move."""
    refs = repo.git("for-each-ref", "--format=%(refname) %(objectname) %(symref)")
    return refs, repo.git("symbolic-ref", "-q", "HEAD"), repo.git("status", "--porcelain")


def _runs(repo: Repo) -> dict[str, list[str]]:
    runs = repo.root / "tasks" / "runs"
    return {entry.name: sorted(path.name for path in entry.iterdir()) for entry in runs.iterdir()}


async def _stored(database: Path, session_id: str) -> list[str]:
    async with SqliteSessionStore(database) as store:
        page = await store.read(session_id, limit=1000)
    return [serialize_event(item.event).decode() for item in page.events]


def _session_statuses(database: Path) -> list[tuple[str, ...]]:
    with contextlib.closing(sqlite3.connect(database)) as connection:
        return connection.execute("SELECT status FROM sessions").fetchall()


def _assert_written_preflight(
    repo: Repo, report: dict[str, object], output: str, *, stage: str, code: str, message: str
) -> None:
    """A preflight report (§9.4) at its canonical path, its events in a closed companion, and nothing else."""
    assert report["schema"] == "run-preflight-report/v1"
    assert report["status"] == "failed"
    error = {"stage": stage, "code": code, "message": message}
    assert report["error"] == error
    assert report["failures"] == [error]
    assert report["task"] == {"id": repo.task_id, "title": "A test task"}
    assert report["branch"] == f"tasks/{repo.task_id}"
    validate_run_preflight_report(report)
    run_id = cast("str", report["runId"])
    canonical = f"tasks/runs/{run_id}/preflight.json"
    deliverables = _deliverables(report)
    assert deliverables == {
        "artifacts": [],
        "reportPath": canonical,
        "reportWritten": True,
        "sessionId": report["sessionId"],
    }
    assert _runs(repo) == {run_id: ["preflight.json", "session.sqlite"]}
    assert (repo.root / canonical).read_text() + f"report: {canonical}\n" in output
    assert f"{code}: {message}\n" in output
    events = _events(report)
    assert [event["type"] for event in events] == _PREFLIGHT_EVENTS
    assert {"action": "git.branch", "subject": f"tasks/{repo.task_id}"}.items() <= _data(events[0]).items()
    assert _data(events[1]) == {
        "code": code,
        "message": message,
        "retryable": False,
        "taskId": repo.task_id,
        "sessionId": report["sessionId"],
        "runId": run_id,
        "stage": stage,
    }
    database = repo.root / "tasks" / "runs" / run_id / "session.sqlite"
    assert trio.run(_stored, database, cast("str", report["sessionId"])) == report["events"]
    assert _session_statuses(database) == [("closed",)]


# ------------------------------------------------------------------ base trust (§6.1)


def _assert_base_refused(
    repo: Repo,
    *,
    options: tuple[str, ...],
    code: str,
    message: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    before = _git_state(repo)
    status, report, output = repo.gate(*options, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1, output
    _assert_written_preflight(repo, report, output, stage="git", code=code, message=message)
    decision = _data(_events(report)[0])
    assert (decision["effect"], decision["reason"]) == ("deny", message)
    assert _git_state(repo) == before


@pytest.mark.parametrize(
    ("base", "reason"),
    [
        ("tasks/demo-task", "is not a mainish branch"),
        ("HEAD", "is not a mainish branch"),
        ("refs/tags/v1", "is not a mainish branch"),
        ("tags/main", "is not a mainish branch"),
        ("refs/remotes/upstream/main", "is not a mainish branch"),
        ("upstream/develop", "is not a mainish branch"),
        ("refs/heads/main-old", "is not a mainish branch"),
        ("-main", "is not a ref"),
        ("--all", "is not a ref"),
    ],
)
def test_a_base_that_is_not_a_mainish_ref_is_untrusted(
    repo: Repo,
    *,
    base: str,
    reason: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    main_sha = repo.git("rev-parse", "main")
    repo.git("tag", "v1", "main")
    repo.git("update-ref", "refs/tags/main", main_sha)
    repo.git("update-ref", "refs/remotes/upstream/main", main_sha)
    repo.git("update-ref", "refs/remotes/upstream/develop", main_sha)
    repo.git("update-ref", "refs/heads/main-old", main_sha)
    message = f"base {base!r} {reason}"
    options = ("--test-cmd", _PASSING, f"--base={base}")  # "=" lets argparse take a leading dash
    _assert_base_refused(
        repo,
        options=options,
        code="GIT_BASE_UNTRUSTED",
        message=message,
        capsys=capsys,
        monkeypatch=monkeypatch,
    )


@pytest.mark.parametrize("base", ["no-such-branch", "refs/heads/develop", "origin/main"])
def test_a_base_that_names_no_ref_is_unavailable(
    repo: Repo, base: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    message = f"base {base!r} does not resolve to a ref"
    options = ("--test-cmd", _PASSING, "--base", base)
    _assert_base_refused(
        repo,
        options=options,
        code="GIT_BASE_UNAVAILABLE",
        message=message,
        capsys=capsys,
        monkeypatch=monkeypatch,
    )


@pytest.mark.parametrize("expression", ["sha", "main^{commit}", "main~0"])
def test_a_base_that_is_a_commit_but_not_a_ref_is_untrusted(
    repo: Repo, expression: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = repo.git("rev-parse", "main") if expression == "sha" else expression
    options = ("--test-cmd", _PASSING, "--base", base)
    status, report, _ = repo.gate(*options, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert _failure(report) == {
        "stage": "git",
        "code": "GIT_BASE_UNTRUSTED",
        "message": f"base {base!r} is a commit, not a mainish branch",
    }


def _drop_local_main(repo: Repo) -> str:
    """Delete the only local mainish branch, returning the commit it pointed at."""
    sha = repo.git("rev-parse", "main")
    repo.git("branch", "-q", "-D", "main")
    return sha


def test_without_any_mainish_ref_the_base_is_unavailable(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sha = _drop_local_main(repo)
    # Neither an origin/HEAD to a non-mainish branch nor non-origin remotes nor lookalikes count.
    repo.git("update-ref", "refs/remotes/origin/feature", sha)
    repo.git("symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/feature")
    repo.git("update-ref", "refs/remotes/upstream/main", sha)
    repo.git("update-ref", "refs/heads/mainline", sha)
    repo.git("update-ref", "refs/tags/main", sha)
    message = "no main, master, trunk or develop branch to compare with"
    options = ("--test-cmd", _PASSING)
    _assert_base_refused(
        repo,
        options=options,
        code="GIT_BASE_UNAVAILABLE",
        message=message,
        capsys=capsys,
        monkeypatch=monkeypatch,
    )


@pytest.mark.parametrize(
    ("refs", "origin_head", "expected"),
    [
        (("refs/remotes/origin/trunk",), None, "refs/remotes/origin/trunk"),
        (("refs/remotes/origin/main", "refs/remotes/origin/develop"), None, "refs/remotes/origin/main"),
        (
            ("refs/remotes/origin/main", "refs/remotes/origin/develop"),
            "refs/remotes/origin/develop",
            "refs/remotes/origin/develop",
        ),
        (("refs/remotes/origin/master", "refs/heads/develop"), None, "refs/heads/develop"),
        (("refs/remotes/origin/trunk",), "refs/remotes/origin/main", "refs/remotes/origin/trunk"),
    ],
    ids=[
        "origin-trunk",
        "origin-in-mainish-order",
        "origin-head-first",
        "local-branch-first",
        "dangling-origin-head-falls-through",
    ],
)
def test_base_discovery_follows_the_documented_order(
    repo: Repo,
    *,
    refs: tuple[str, ...],
    origin_head: str | None,
    expected: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sha = _drop_local_main(repo)
    for ref in refs:
        repo.git("update-ref", ref, sha)
    if origin_head is not None:
        repo.git("symbolic-ref", "refs/remotes/origin/HEAD", origin_head)
    status, report, output = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 0, output
    git = cast("dict[str, object]", report["git"])
    assert (git["baseRef"], git["baseSha"], git["mergeBaseSha"]) == (expected, sha, sha)
    validate_run_report(report)


# ------------------------------------------------------------------ manifest re-check (§5 step 3)


def _replace_with_symlink(repo: Repo) -> None:
    manifest = repo.root / repo.manifest
    copy = repo.root.parent / f"{repo.root.name}-manifest-copy.yaml"
    copy.write_bytes(manifest.read_bytes())
    manifest.unlink()
    manifest.symlink_to(copy)


_MUTATIONS: dict[str, tuple[Callable[[Repo], None], Callable[[Repo], str]]] = {
    "edited": (
        lambda repo: repo.write(repo.manifest, (repo.root / repo.manifest).read_text() + "# edited\n"),
        lambda repo: "the manifest changed during preflight",
    ),
    "removed": (
        lambda repo: (repo.root / repo.manifest).unlink(),
        lambda repo: (
            "invalid task manifest: <file> "
            f"cannot read {repo.root / repo.manifest}: No such file or directory"
        ),
    ),
    "same-bytes-symlink": (
        _replace_with_symlink,
        lambda repo: f"the manifest must be the file tasks/{repo.task_id}.yaml, not {repo.manifest}",
    ),
}


@pytest.mark.parametrize("mutation", sorted(_MUTATIONS))
def test_a_manifest_changed_during_preflight_is_refused(
    repo: Repo, mutation: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file really changes on disk; the only seam is *when*.

    ``fingerprint_runs`` is the one module-level call the run makes between the manifest read and its
    re-check (after the git preflight), so wrapping it changes the file at exactly that point instead of
    racing a thread against the gate.
    """
    mutate, expected_message = _MUTATIONS[mutation]
    calls: list[str] = []

    def mutate_then_fingerprint(root: str) -> dict[str, str]:
        calls.append(root)
        mutate(repo)
        return fingerprint_runs(root)

    monkeypatch.setattr("harness_exit_gate._preflight.fingerprint_runs", mutate_then_fingerprint)
    status, report, output = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1, output
    assert len(calls) == 1
    message = expected_message(repo)
    _assert_written_preflight(
        repo, report, output, stage="manifest", code="MANIFEST_CHANGED_DURING_PREFLIGHT", message=message
    )
    decision = _data(_events(report)[0])
    assert (decision["effect"], decision["reason"]) == ("allow", f"HEAD is verified as tasks/{repo.task_id}")


# ------------------------------------------------------------------ process-group cleanup (§7, §5 step 11)


def _running_in_group(group: int) -> bool:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            return True
    return False


def test_a_process_group_that_outlives_the_cleanup_blocks_the_run(
    repos: RepoFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real grandchild stays in the group; only the gate's SIGKILL to that group is dropped.

    Nothing unprivileged survives SIGKILL, so ``os.killpg`` (as the process module sees it) swallows
    SIGKILL and passes every other signal, including the liveness probe ``0``, to the real call. The
    gate's own ``/proc`` check then finds the sleeping grandchild and must report the group as alive.
    """
    script = tmp_path / "leave_a_child.py"
    script.write_text(
        "import subprocess\nimport sys\n\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
    )
    command = f"{sys.executable} {script}"
    repo = repos(commands={command: "allow"})
    real_killpg = os.killpg
    dropped: list[int] = []

    def killpg_without_sigkill(group: int, sig: int) -> None:
        if sig == signal.SIGKILL:
            dropped.append(group)
            return
        real_killpg(group, sig)

    monkeypatch.setattr("harness_exit_gate._process.os.killpg", killpg_without_sigkill)
    try:
        status, report, output = repo.gate("--test-cmd", command, capsys=capsys, monkeypatch=monkeypatch)
        assert len(dropped) == 1
        assert _running_in_group(dropped[0]), "the grandchild must really have outlived the test command"
    finally:
        for group in dropped:
            with contextlib.suppress(ProcessLookupError):
                real_killpg(group, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(_running_in_group(group) for group in dropped) and time.monotonic() < deadline:
            time.sleep(0.02)
    assert status == 1, output
    failure = {
        "stage": "tests",
        "code": "TEST_PROCESS_GROUP_CLEANUP_FAILED",
        "message": "the test command's process group did not end",
    }
    assert report["status"] == "blocked"
    assert (report["failure"], report["failures"]) == (failure, [failure])
    tests = cast("dict[str, object]", report["tests"])
    assert (tests["exitCode"], tests["ok"]) == (0, True)
    assert "postTest" in cast("dict[str, object]", report["git"])
    assert report["policy"] == {
        "changedPathsOk": True,
        "changedPaths": ["src/feature.py"],
        "violations": [],
    }
    events = _events(report)
    assert [event["type"] for event in events] == [*_CLEAN_RUN_EVENTS[:5], "error", *_CLEAN_RUN_EVENTS[5:]]
    assert {"code": failure["code"], "stage": "tests", "retryable": False}.items() <= _data(events[5]).items()
    assert _data(events[6]) == {"taskId": repo.task_id, "phase": "blocked", "note": failure["message"]}
    assert {"status": "blocked"}.items() <= _data(events[7]).items()
    run_id = cast("str", report["runId"])
    canonical = f"tasks/runs/{run_id}/report.json"
    session_id = cast("str", _deliverables(report)["sessionId"])
    assert _deliverables(report) == {
        "artifacts": [f"tasks/runs/{run_id}/session.sqlite"],
        "reportPath": canonical,
        "reportWritten": True,
        "sessionId": session_id,
    }
    database = repo.root / "tasks" / "runs" / run_id / "session.sqlite"
    assert trio.run(_stored, database, session_id) == cast("list[str]", report["events"])[:-2]
    assert _runs(repo) == {run_id: ["report.json", "session.sqlite"]}
    assert (repo.root / canonical).read_text() + f"report: {canonical}\n" in output
    assert f"TEST_PROCESS_GROUP_CLEANUP_FAILED: {failure['message']}\n" in output
    validate_run_report(report)


# ------------------------------------------------------------------ SQLite companion links (§9.1, §9.2)


def _plant_in_run_directory(
    monkeypatch: pytest.MonkeyPatch, name: str, kind: str, target: Path
) -> list[Path]:
    """Plant a link named ``name`` in the run directory as soon as the gate creates it.

    The run id is a fresh uuid, so ``prepare_run_directory`` (as the run module calls it) is wrapped to
    learn the directory; the directory itself and the planted link are real.
    """
    planted: list[Path] = []

    def prepare_then_plant(root: str, run_id: str) -> Path:
        directory = prepare_run_directory(root, run_id)
        link = directory / name
        if kind == "symlink":
            link.symlink_to(target)
        else:
            os.link(target, link)
        planted.append(link)
        return directory

    monkeypatch.setattr("harness_exit_gate._finish.prepare_run_directory", prepare_then_plant)
    return planted


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
@pytest.mark.parametrize("suffix", ["", "-wal", "-shm", "-journal"])
def test_a_linked_sqlite_file_fails_persistence_without_writing_through_it(
    repo: Repo,
    *,
    tmp_path: Path,
    suffix: str,
    kind: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = tmp_path / "outside.bin"
    target.write_bytes(b"not a database\n")
    name = f"session.sqlite{suffix}"
    planted = _plant_in_run_directory(monkeypatch, name, kind, target)
    status, report, output = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1, output
    assert len(planted) == 1
    failure = {
        "stage": "evidence",
        "code": "SESS_PERSIST_FAILED",
        "message": f"{planted[0]} must be a single-link regular file",
    }
    assert report["status"] == "failed"
    assert (report["failure"], report["failures"]) == (failure, [failure])
    assert cast("dict[str, object]", report["tests"])["ok"] is True
    assert cast("dict[str, object]", report["policy"])["changedPathsOk"] is True
    events = _events(report)
    assert [event["type"] for event in events] == _CLEAN_RUN_EVENTS
    assert _data(events[5]) == {"taskId": repo.task_id, "phase": "blocked", "note": failure["message"]}
    run_id = cast("str", report["runId"])
    canonical = f"tasks/runs/{run_id}/report.json"
    assert _deliverables(report) == {"artifacts": [], "reportPath": canonical, "reportWritten": True}
    assert {"status": "failed", "reportPath": canonical}.items() <= _data(events[6]).items()
    # The store never opened: no database, no journal, and the link and its target are untouched.
    assert _runs(repo) == {run_id: sorted(["report.json", name])}
    assert planted[0].is_symlink() is (kind == "symlink")
    assert target.read_bytes() == b"not a database\n"
    assert target.stat().st_nlink == (2 if kind == "hardlink" else 1)
    assert (repo.root / canonical).read_text() + f"report: {canonical}\n" in output
    assert f"SESS_PERSIST_FAILED: {failure['message']}\n" in output
    validate_run_report(report)


def test_a_linked_sqlite_file_leaves_a_preflight_report_without_a_session(
    repo: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "outside.bin"
    target.write_bytes(b"not a database\n")
    planted = _plant_in_run_directory(monkeypatch, "session.sqlite-wal", "symlink", target)
    repo.git("checkout", "-q", "--detach")
    status, report, output = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1, output
    assert report["schema"] == "run-preflight-report/v1"
    assert _failure(report)["code"] == "GIT_DETACHED_UNVERIFIED"
    run_id = cast("str", report["runId"])
    canonical = f"tasks/runs/{run_id}/preflight.json"
    assert _deliverables(report) == {"artifacts": [], "reportPath": canonical, "reportWritten": True}
    assert _runs(repo) == {run_id: ["preflight.json", "session.sqlite-wal"]}
    assert planted[0].is_symlink()
    assert target.read_bytes() == b"not a database\n"
    validate_run_preflight_report(report)
