"""The gate does not trust the branch it judges (issue #15, docs/decisions/003).

The manifest comes from the base, every commit of the range is judged, the base is not the
branch's to choose, the paths the gate relies on are out of every task's reach, and the gate
refuses to judge with code that lives in the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest

from harness_exit_gate import validate_run_preflight_report, validate_run_report

if TYPE_CHECKING:
    from conftest import Repo, RepoFactory


# Every test runs real gates (about 45 git processes each): outside the inner loop.
pytestmark = pytest.mark.slow
_PASSING = f"{sys.executable} -c pass"
_GATE_SOURCE = Path(__file__).resolve().parents[1] / "src" / "harness_exit_gate"


@pytest.fixture(autouse=True)
def _no_pull_request_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HARNESS_PULL_REQUEST_URL", raising=False)


def _failure(report: dict[str, object]) -> dict[str, object]:
    failure = report.get("failure") or report.get("error")
    assert isinstance(failure, dict)
    return cast("dict[str, object]", failure)


def _codes(report: dict[str, object]) -> list[str]:
    return [cast("str", failure["code"]) for failure in cast("list[dict[str, object]]", report["failures"])]


def _violations(report: dict[str, object]) -> list[str]:
    return cast("list[str]", cast("dict[str, object]", report["policy"])["violations"])


def _changes(report: dict[str, object]) -> set[tuple[str, str, str]]:
    git = cast("dict[str, dict[str, list[dict[str, str]]]]", report["git"])
    return {(change["origin"], change["status"], change["path"]) for change in git["preTest"]["changes"]}


def _ci(repo: Repo, *, base: str | None = None) -> tuple[str, ...]:
    """CI-mode options for the checked-out head, against ``main`` unless told otherwise."""
    return (
        "--ci-head-ref",
        f"tasks/{repo.task_id}",
        "--head-sha",
        repo.git("rev-parse", "HEAD"),
        "--base",
        base if base is not None else repo.git("rev-parse", "main"),
    )


def _assert_blocked_before_tests(report: dict[str, object]) -> None:
    assert report["status"] == "blocked"
    assert "tests" not in report, "the branch's test command must not run after a scope violation"
    validate_run_report(report)


# ------------------------------------------------------------------ (a) the manifest comes from the base


@pytest.mark.parametrize("mode", ["local", "ci"])
def test_a_head_that_widens_its_own_manifest_is_judged_by_the_base_manifest(
    repo: Repo,
    repos: RepoFactory,
    mode: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    widened = repos.manifest_text(repo.task_id, allowed=["**"], commands={_PASSING: "allow"})
    repo.write(repo.manifest, widened.replace("title: A test task", "title: Widened by the branch"))
    repo.write("secret/config.py", "TOKEN = 'exfiltrated'\n")
    repo.commit("widen the scope and touch a secret")
    options = _ci(repo) if mode == "ci" else ()
    status, report, output = repo.gate(
        "--test-cmd", _PASSING, *options, capsys=capsys, monkeypatch=monkeypatch
    )
    assert status == 1, output
    _assert_blocked_before_tests(report)
    assert _codes(report) == ["PROTECTED_PATH_VIOLATION", "PATH_SCOPE_VIOLATION"]
    assert _violations(report) == ["secret/config.py", repo.manifest]
    message = cast("str", _failure(report)["message"])
    assert f"{repo.manifest} is this task's merged manifest, which a branch never edits" in message
    # The title, like the scope, is the base's.
    assert cast("dict[str, object]", report["task"])["title"] == "A test task"


def test_a_new_task_whose_manifest_is_only_on_the_head_fails_with_a_clear_message(
    repo: Repo, repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.git("checkout", "-q", "-b", "tasks/new-task", "main")
    repo.write("tasks/new-task.yaml", repos.manifest_text("new-task", allowed=["**"], commands={}))
    repo.write("secret/config.py", "TOKEN = 'x'\n")
    repo.commit("a task that brings its own manifest")
    base = repo.git("rev-parse", "main")
    for options in ((), ("--ci-head-ref", "tasks/new-task", "--head-sha", repo.git("rev-parse", "HEAD"))):
        extra = ("--base", base) if options else ()
        status, report, output = repo.gate(
            "--test-cmd",
            _PASSING,
            *options,
            *extra,
            manifest="tasks/new-task.yaml",
            capsys=capsys,
            monkeypatch=monkeypatch,
        )
        assert status == 1, output
        assert report["schema"] == "run-preflight-report/v1"
        error = _failure(report)
        assert (error["stage"], error["code"]) == ("manifest", "MANIFEST_NOT_ON_BASE")
        assert error["message"] == (
            f"tasks/new-task.yaml is not on the base {base}: a new task's manifest must land on the "
            "base first, and the gate enforces the base's copy, never the branch's"
        )
        assert "MANIFEST_NOT_ON_BASE: tasks/new-task.yaml is not on the base" in output
        validate_run_preflight_report(report)


def test_a_base_manifest_that_is_invalid_a_symlink_or_another_id_is_refused(
    repo: Repo, repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    good = (repo.root / repo.manifest).read_text()
    cases = {
        "MANIFEST_INVALID": lambda: repo.write(repo.manifest, "id: demo-task\ntitle: yes\n"),
        "MANIFEST_PATH_INVALID": lambda: repo.write(
            repo.manifest, good.replace("id: demo-task", "id: other")
        ),
    }
    for code, break_the_base in cases.items():
        repo.git("checkout", "-q", "main")
        break_the_base()
        repo.commit("the base's copy")
        repo.git("checkout", "-q", f"tasks/{repo.task_id}")
        repo.git("reset", "-q", "--hard", "main")
        repo.write(repo.manifest, good)  # the work tree's copy is valid: it is not the one enforced
        status, report, _ = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
        assert status == 1
        assert (_failure(report)["stage"], _failure(report)["code"]) == ("manifest", code)
        assert "the base's tasks/demo-task.yaml" in cast("str", _failure(report)["message"])
        repo.git("checkout", "-q", "--", ".")
    repo.git("checkout", "-q", "main")
    (repo.root / repo.manifest).unlink()
    (repo.root / repo.manifest).symlink_to("../docs/readme.md")
    repo.commit("the base's manifest is a symlink")
    repo.git("checkout", "-q", f"tasks/{repo.task_id}")
    repo.git("reset", "-q", "--hard", "main")
    (repo.root / repo.manifest).unlink()
    repo.write(repo.manifest, good)
    status, report, _ = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert _failure(report)["code"] == "MANIFEST_PATH_INVALID"
    assert "is not a regular file on the base" in cast("str", _failure(report)["message"])


# ------------------------------------------------------------------ (c) every commit of the range


@pytest.mark.parametrize("mode", ["local", "ci"])
def test_a_change_committed_and_then_reverted_is_still_a_violation(
    repo: Repo, mode: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.write("docs/readme.md", "a change outside the scope\n")
    repo.commit("edit outside the scope")
    repo.git("revert", "--no-edit", "HEAD")
    assert repo.git("diff", "main", "HEAD", "--name-only") == "src/feature.py"
    options = _ci(repo) if mode == "ci" else ()
    status, report, output = repo.gate(
        "--test-cmd", _PASSING, *options, capsys=capsys, monkeypatch=monkeypatch
    )
    assert status == 1, output
    _assert_blocked_before_tests(report)
    assert _codes(report) == ["PATH_SCOPE_VIOLATION"]
    assert _violations(report) == ["docs/readme.md"]
    assert ("committed", "M", "docs/readme.md") in _changes(report)


def test_a_rename_out_of_scope_and_back_is_judged_on_both_sides(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.git("mv", "docs/readme.md", "src/readme.md")
    repo.commit("move a document into the scope")
    repo.git("mv", "src/readme.md", "docs/readme.md")
    repo.commit("and back")
    status, report, _ = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert _violations(report) == ["docs/readme.md"]
    renames = sorted(change for change in _changes(report) if change[1].startswith("R"))
    assert renames == [("committed", "R100", "docs/readme.md"), ("committed", "R100", "src/readme.md")]


def test_a_merge_resolution_that_changes_a_forbidden_path_is_a_violation(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.git("checkout", "-q", "-b", "side")
    repo.write("src/side.py", "SIDE = 1\n")
    repo.commit("side work")
    repo.git("checkout", "-q", f"tasks/{repo.task_id}")
    repo.git("merge", "-q", "--no-ff", "--no-commit", "side")
    repo.write("docs/readme.md", "slipped into the merge\n")  # an "evil merge": in neither parent
    repo.commit("merge side")
    repo.write("docs/readme.md", "docs\n")
    repo.commit("put it back")
    status, report, _ = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert _violations(report) == ["docs/readme.md"]


def test_merging_the_base_into_the_branch_judges_only_the_branch(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.git("checkout", "-q", "main")
    repo.write("docs/readme.md", "the base moved on\n")
    repo.commit("base work outside the task's scope")
    repo.git("checkout", "-q", f"tasks/{repo.task_id}")
    repo.git("merge", "-q", "--no-edit", "main")
    status, report, output = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 0, output
    assert _changes(report) == {("committed", "A", "src/feature.py")}


def test_a_root_commit_brought_in_by_an_unrelated_merge_is_judged(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.git("checkout", "-q", "--orphan", "stray")
    repo.git("rm", "-rq", "--cached", ".")
    for path in repo.git("ls-files", "--others", "--exclude-standard").splitlines():
        (repo.root / path).unlink()
    repo.write("stray/payload.py", "PAYLOAD = 1\n")
    repo.commit("an unrelated root")
    repo.git("checkout", "-q", f"tasks/{repo.task_id}")
    repo.git("merge", "-q", "--no-edit", "--allow-unrelated-histories", "stray")
    repo.git("rm", "-q", "stray/payload.py")
    repo.commit("and gone again")
    status, report, _ = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert _violations(report) == ["stray/payload.py"]
    assert ("committed", "A", "stray/payload.py") in _changes(report)


# ------------------------------------------------------------------ (d) the branch does not choose its base


def _add_upstream(repo: Repo) -> None:
    """Record ``main`` as the upstream's, as a clone has it: ``refs/remotes/origin/main``."""
    repo.git("update-ref", "refs/remotes/origin/main", repo.git("rev-parse", "main"))


def _forbidden_then_more(repo: Repo) -> None:
    repo.write("docs/readme.md", "outside the scope\n")
    repo.commit("the change to hide")
    repo.write("src/later.py", "LATER = 1\n")
    repo.commit("an innocent later commit")


@pytest.mark.parametrize("nomination", ["develop-at-head", "develop-before-head", "main-moved-onto-head"])
def test_a_base_that_the_branch_nominated_in_local_mode_is_refused(
    repo: Repo, nomination: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _add_upstream(repo)
    _forbidden_then_more(repo)
    options: tuple[str, ...] = ("--base", "develop")
    if nomination == "develop-at-head":
        repo.git("update-ref", "refs/heads/develop", "HEAD")
    elif nomination == "develop-before-head":
        repo.git("update-ref", "refs/heads/develop", "HEAD~1")
    else:
        repo.git("update-ref", "refs/heads/main", "HEAD")
        options = ()
    status, report, output = repo.gate(
        "--test-cmd", _PASSING, *options, capsys=capsys, monkeypatch=monkeypatch
    )
    assert status == 1, output
    assert report["schema"] == "run-preflight-report/v1"
    error = _failure(report)
    assert (error["stage"], error["code"]) == ("git", "GIT_BASE_UNTRUSTED")
    assert "a branch cannot choose its own base" in cast("str", error["message"])
    assert "refs/remotes/origin/main" in cast("str", error["message"])


def test_a_ci_base_that_is_one_of_the_branch_commits_is_refused(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _add_upstream(repo)
    _forbidden_then_more(repo)
    options = _ci(repo, base=repo.git("rev-parse", "HEAD~1"))
    status, report, _ = repo.gate("--test-cmd", _PASSING, *options, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert _failure(report)["code"] == "GIT_BASE_UNTRUSTED"
    # The true base still judges the whole branch.
    status, report, _ = repo.gate("--test-cmd", _PASSING, *_ci(repo), capsys=capsys, monkeypatch=monkeypatch)
    assert (status, _violations(report)) == (1, ["docs/readme.md"])


def test_a_ci_base_needs_a_mainish_branch_to_be_verified(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    options = _ci(repo)
    repo.git("update-ref", "refs/heads/trusted-elsewhere", "main")
    repo.git("branch", "-q", "-D", "main")
    status, report, _ = repo.gate("--test-cmd", _PASSING, *options, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert _failure(report) == {
        "stage": "git",
        "code": "GIT_BASE_UNTRUSTED",
        "message": f"base {options[-1]} cannot be verified: no main, master, trunk or develop branch",
    }


def test_with_an_upstream_a_branch_forked_from_the_upstream_main_passes(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _add_upstream(repo)
    repo.git("branch", "-q", "-D", "main")
    status, report, output = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 0, output
    assert cast("dict[str, object]", report["git"])["baseRef"] == "refs/remotes/origin/main"


# ------------------------------------------------------------------ (e) paths no task may change


@pytest.mark.parametrize(
    "path",
    [
        "tools/exit-gate/src/harness_exit_gate/_run.py",
        "tools/exit-gate/pyproject.toml",
        ".ci/run",
        ".github/workflows/ci.yml",
        "tasks/scenarios/demo-golden.yaml",
        "tasks/another-task.yaml",
        "tasks/README.md",
        ".ci",
    ],
)
def test_a_head_that_changes_what_the_gate_relies_on_fails_even_when_its_scope_allows_everything(
    repos: RepoFactory, path: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = repos(allowed=("**",))
    repo.write(path, "def run_gate(options): return 0  # the branch's own verdict\n")
    repo.commit("change the judge")
    status, report, output = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1, output
    _assert_blocked_before_tests(report)
    assert _codes(report) == ["PROTECTED_PATH_VIOLATION"]
    assert _violations(report) == [path]
    decisions = [json.loads(wire)["data"] for wire in cast("list[str]", report["events"])]
    scope = next(data for data in decisions if data.get("subject") == "pre-tests")
    assert scope["reason"] == "1 changed path(s) outside allowed_paths or under the gate's protected paths"


def test_a_test_command_that_writes_a_protected_path_is_a_post_test_violation(
    repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    command = f"{sys.executable} -c \"__import__('os').makedirs('.ci'), open('.ci/run', 'w')\""
    repo = repos(allowed=("**",), commands={command: "allow"})
    status, report, _ = repo.gate("--test-cmd", command, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1
    assert _codes(report) == ["POST_TEST_PATH_SCOPE_VIOLATION"]
    assert _violations(report) == [".ci/run"]


# ------------------------------------------------------------------ the gate is not the checkout's own code


def _subprocess_environment() -> dict[str, str]:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    environment["PYTHONDONTWRITEBYTECODE"] = "1"
    return environment


def _run_copied_gate(repo: Repo, python: str, *arguments: str) -> tuple[int, dict[str, object]]:
    """Run ``main`` from the copy of the gate committed at ``vendor/`` in the repository."""
    script = (
        "import sys; sys.path.insert(0, 'vendor'); "
        "from harness_exit_gate import main; sys.exit(main(sys.argv[1:]))"
    )
    completed = subprocess.run(
        [python, "-c", script, "run", repo.manifest, "--test-cmd", _PASSING, *arguments],
        cwd=repo.root,
        env=_subprocess_environment(),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    body, _, _ = completed.stdout.rpartition("\n}\n")
    return completed.returncode, json.loads(body + "\n}\n")


def _vendor_the_gate_on_main(repo: Repo) -> None:
    repo.git("checkout", "-q", "main")
    shutil.copytree(
        _GATE_SOURCE, repo.root / "vendor" / "harness_exit_gate", ignore=shutil.ignore_patterns("__pycache__")
    )
    repo.commit("vendor the gate")
    repo.git("checkout", "-q", f"tasks/{repo.task_id}")
    repo.git("merge", "-q", "--no-edit", "main")


@pytest.mark.slow
def test_a_gate_imported_from_the_checkout_refuses_to_judge_it(repo: Repo) -> None:
    _vendor_the_gate_on_main(repo)
    status, report = _run_copied_gate(repo, sys.executable)
    assert status == 1
    error = _failure(report)
    assert (error["stage"], error["code"]) == ("git", "GATE_INSIDE_CHECKOUT")
    assert f"the gate runs from {repo.root.resolve() / 'vendor' / 'harness_exit_gate'}, inside" in cast(
        "str", error["message"]
    )
    assert "task" not in report  # nothing the refused gate read is trusted
    validate_run_preflight_report(report)


@pytest.mark.slow
def test_the_local_development_flag_lets_a_checkout_gate_judge_in_local_mode_only(repo: Repo) -> None:
    _vendor_the_gate_on_main(repo)
    status, report = _run_copied_gate(repo, sys.executable, "--allow-gate-in-checkout")
    assert (status, report["status"]) == (0, "passed")
    head, base = repo.git("rev-parse", "HEAD"), repo.git("rev-parse", "main")
    ci = ("--ci-head-ref", f"tasks/{repo.task_id}", "--head-sha", head, "--base", base)
    status, report = _run_copied_gate(repo, sys.executable, *ci, "--allow-gate-in-checkout")
    assert status == 1
    assert _failure(report) == {
        "stage": "git",
        "code": "GIT_CI_CONTEXT_INVALID",
        "message": "--allow-gate-in-checkout is for local development; CI runs the base's gate",
    }


@pytest.mark.slow
def test_an_interpreter_environment_inside_the_checkout_is_refused(repo: Repo) -> None:
    """A ``.venv`` in the checkout is the head's: its ``.pth`` files run before the gate does."""
    venv = repo.root / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next(venv.glob("lib/python*/site-packages"))
    outer_site = next(Path(sys.prefix).glob("lib/python*/site-packages"))
    (site / "outer.pth").write_text(f"import site; site.addsitedir({str(outer_site)!r})\n")
    script = "import sys; from harness_exit_gate import main; sys.exit(main(sys.argv[1:]))"
    completed = subprocess.run(
        [str(venv / "bin" / "python"), "-c", script, "run", repo.manifest, "--test-cmd", _PASSING],
        cwd=repo.root,
        env=_subprocess_environment(),
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert completed.returncode == 1, completed.stderr
    assert f"GATE_INSIDE_CHECKOUT: the gate runs from {venv.resolve()}, inside" in completed.stderr
