"""A change may not carry a ``.gitattributes`` nor a link that reaches what its scope does not.

``.gitattributes`` decides what git shows and exports (``-diff``, ``export-ignore``,
``filter=``), so a change to one anywhere — even inside ``allowed_paths`` — is
``GITATTRIBUTES_CHANGED``. A symbolic link inside the scope whose target is outside the
repository, in ``.git``, under the gate's protected paths or outside ``allowed_paths`` is
``SYMLINK_TARGET_VIOLATION``: reading or writing through it reaches what the task may not.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, cast

import pytest

from harness_exit_gate import validate_run_report

if TYPE_CHECKING:
    from conftest import Repo, RepoFactory

# Every test runs real gates on real repositories (about 45 git processes each).
pytestmark = pytest.mark.slow
_PASSING = f"{sys.executable} -c pass"


def _codes(report: dict[str, object]) -> list[str]:
    failures = cast("list[dict[str, object]]", report.get("failures", []))
    return [cast("str", failure["code"]) for failure in failures]


def _violations(report: dict[str, object]) -> list[str]:
    return cast("list[str]", cast("dict[str, object]", report["policy"])["violations"])


def _message(report: dict[str, object]) -> str:
    return cast("str", cast("dict[str, object]", report["failure"])["message"])


def _blocked(report: dict[str, object], code: str, path: str) -> None:
    assert report["status"] == "blocked", report
    assert "tests" not in report, "the branch's test command must not run after a violation"
    assert _codes(report) == [code]
    assert _violations(report) == [path]
    validate_run_report(report)


def _link(repo: Repo, path: str, target: str) -> None:
    link = repo.root / path
    link.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, link)


@pytest.mark.parametrize(
    ("path", "committed"),
    [
        ("src/.gitattributes", True),
        ("src/.gitattributes", False),
        ("src/nested/deeper/.gitattributes", True),
        ("src/.GitAttributes", True),
    ],
)
def test_a_gitattributes_inside_the_scope_is_a_violation(
    repo: Repo,
    path: str,
    committed: bool,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    repo.write(path, "* -diff export-ignore filter=hidden\n")
    if committed:
        repo.commit("attributes")
    status, report, output = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1, output
    _blocked(report, "GITATTRIBUTES_CHANGED", path)
    assert path in _message(report)


def test_removing_a_gitattributes_is_a_violation_too(
    repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = repos()
    repo.git("checkout", "-q", "main")
    repo.write("src/.gitattributes", "*.bin binary\n")
    repo.commit("attributes on the base")
    repo.git("checkout", "-q", f"tasks/{repo.task_id}")
    repo.git("rebase", "-q", "main")
    (repo.root / "src" / ".gitattributes").unlink()
    repo.commit("drop the attributes")
    status, report, output = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1, output
    _blocked(report, "GITATTRIBUTES_CHANGED", "src/.gitattributes")


@pytest.mark.parametrize(
    "target",
    [
        "../tasks/demo-task.yaml",  # the gate's protected paths
        "../docs/readme.md",  # outside allowed_paths
        "../.git/config",  # the repository's own metadata
        "../../outside.txt",  # out of the repository
        "/etc/passwd",  # absolute: out of the repository
        "nested/../../tasks",  # a protected directory, by a winding way
        "..",  # the repository root
    ],
)
@pytest.mark.parametrize("committed", [True, False])
def test_a_link_inside_the_scope_to_what_the_scope_does_not_cover_is_a_violation(
    repo: Repo,
    target: str,
    committed: bool,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _link(repo, "src/link", target)
    if committed:
        repo.commit("a link")
    status, report, output = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1, output
    _blocked(report, "SYMLINK_TARGET_VIOLATION", "src/link")
    assert "src/link" in _message(report)


def test_a_link_through_an_unchanged_link_is_judged_where_it_really_lands(
    repos: RepoFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = repos()
    repo.git("checkout", "-q", "main")
    _link(repo, "src/hop", "../tasks")  # trusted: it is on the base
    repo.commit("a link on the base")
    repo.git("checkout", "-q", f"tasks/{repo.task_id}")
    repo.git("rebase", "-q", "main")
    _link(repo, "src/manifests", "hop")
    repo.commit("a link to the link")
    status, report, output = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 1, output
    _blocked(report, "SYMLINK_TARGET_VIOLATION", "src/manifests")


def test_links_that_stay_inside_the_scope_pass(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _link(repo, "src/alias.py", "app.py")
    _link(repo, "src/nested/up.py", "../feature.py")
    _link(repo, "src/dangling.py", "missing.py")
    repo.commit("links inside the scope")
    status, report, output = repo.gate("--test-cmd", _PASSING, capsys=capsys, monkeypatch=monkeypatch)
    assert status == 0, output
    assert report["status"] == "passed"
    validate_run_report(report)
