"""CI runs the base's gate before any of the branch's code (issue #15, docs/decisions/003).

The text checks pin the order in ``.ci/run`` and the hosted workflow. The slow tests execute
``.ci/run``'s own gate block in a temp repository whose base commit is a copy of this checkout:
the block must install the base's gate outside the checkout, judge the head with it, and run
nothing of the branch before the verdict.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest
import yaml

REPOSITORY = Path(__file__).resolve().parents[3]
_CI_RUN = REPOSITORY / ".ci" / "run"
_FETCH_BASE_SCRIPT = 'git cat-file blob "${HARNESS_BASE_SHA}:.ci/exit-gate"'
# Anything that runs or installs the branch's code, or reads its configuration to do so.
_BRANCH_CODE = re.compile(r"\buv (?:sync|lock|run)\b|\bpytest\b|\bruff\b|\bpyright\b|\.ci/packaging")


def _gate_block(script: str) -> tuple[int, int]:
    """The first and last line numbers of ``.ci/run``'s ``HARNESS_TASK`` block."""
    lines = script.splitlines()
    start = lines.index('if [[ -n "${HARNESS_TASK:-}" ]]; then')
    end = lines.index("fi", start)
    return start, end


def test_ci_run_runs_the_bases_gate_before_anything_of_the_branch() -> None:
    script = _CI_RUN.read_text()
    lines = script.splitlines()
    start, end = _gate_block(script)
    block = "\n".join(lines[start : end + 1])
    assert _FETCH_BASE_SCRIPT in block
    assert 'bash "${gate_script}" || gate_status=$?' in block
    assert 'exit "${gate_status}"' in block
    before = [line for line in lines[:start] if _BRANCH_CODE.search(line.split("#", 1)[0])]
    assert before == [], "nothing of the branch may run before the gate"
    assert not _BRANCH_CODE.search(block)
    # The checkout's own gate never judges: no `uv run ... harness-exit-gate run` anywhere.
    assert not re.search(r"uv run[^\n]*harness-exit-gate run", script)


def test_the_ci_gate_script_installs_the_base_outside_the_checkout() -> None:
    script = (REPOSITORY / ".ci" / "exit-gate").read_text()
    assert 'archive --format=tar "${HARNESS_BASE_SHA}"' in script
    assert "--no-editable" in script
    assert "--package harness-exit-gate" in script
    code = [line.strip() for line in script.splitlines() if not line.lstrip().startswith("#")]
    invocations = [line for line in code if re.search(r"harness-exit-gate\"? run", line)]
    assert invocations == ['"${work}/venv/bin/harness-exit-gate" run "tasks/${task_id}.yaml" \\']
    assert not [line for line in code if "uv run" in line], "nothing runs from the checkout's environment"


def test_the_hosted_workflow_runs_the_bases_gate_first_and_keeps_its_evidence_before_ci_run() -> None:
    workflow = yaml.safe_load((REPOSITORY / ".github" / "workflows" / "ci.yml").read_text())
    steps = cast("list[dict[str, object]]", workflow["jobs"]["ci"]["steps"])
    names = [str(step.get("name", step.get("uses"))) for step in steps]
    gate = next(index for index, name in enumerate(names) if name.startswith("exit gate"))
    evidence = names.index("upload exit-gate evidence")
    ci_run = names.index(".ci/run")
    assert gate < evidence < ci_run
    assert _FETCH_BASE_SCRIPT in str(steps[gate]["run"])
    environment = cast("dict[str, str]", steps[gate]["env"])
    assert set(environment) >= {"HARNESS_TASK", "HARNESS_HEAD_SHA", "HARNESS_BASE_SHA"}


# ------------------------------------------------------------------ executing the block (slow)

_MANIFEST = """\
id: ci-demo
title: The CI gate block
goal: Show that CI judges with the base's gate.
acceptance:
  - the gate passes
allowed_paths:
  - "docs/**"
permissions:
  process.exec:
    "uv run --frozen pytest": allow
    "*": deny
delivery:
  type: pull_request
"""


def _git(root: Path, *arguments: str) -> str:
    environment = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    environment.update(
        GIT_AUTHOR_NAME="Gate Test",
        GIT_AUTHOR_EMAIL="gate@example.invalid",
        GIT_COMMITTER_NAME="Gate Test",
        GIT_COMMITTER_EMAIL="gate@example.invalid",
    )
    completed = subprocess.run(
        ["git", *arguments], cwd=root, env=environment, capture_output=True, text=True, check=True
    )
    return completed.stdout.strip()


@pytest.fixture(scope="module")
def ci_checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository whose ``main`` is this checkout's tree, with a tiny test suite.

    Untracked (not ignored) files are copied too, so the base holds what is being tested.
    """
    root = tmp_path_factory.mktemp("ci") / "checkout"
    for relative in _git(REPOSITORY, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split(
        "\0"
    ):
        source = REPOSITORY / relative
        if relative and source.is_file():
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    pyproject = root / "pyproject.toml"
    text, replaced = re.subn(
        r"testpaths = \[[^\]]*\]", 'testpaths = ["ci_demo_tests"]', pyproject.read_text()
    )
    assert replaced == 1
    pyproject.write_text(text)
    (root / "ci_demo_tests").mkdir()
    (root / "ci_demo_tests" / "test_demo.py").write_text("def test_demo() -> None:\n    pass\n")
    (root / "tasks" / "ci-demo.yaml").write_text(_MANIFEST)
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "base")
    return root


def _run_block(checkout: Path, work: Path) -> subprocess.CompletedProcess[str]:
    """Execute ``.ci/run``'s gate block, as ``.ci/run`` would, in ``checkout``."""
    script = _CI_RUN.read_text()
    start, end = _gate_block(script)
    block = "\n".join(script.splitlines()[start : end + 1])
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GIT_", "UV_", "VIRTUAL_ENV", "HARNESS_", "PYTEST"))
    }
    # CI's python3 is the machine's, not this test run's virtual environment.
    own_bin = os.path.join(sys.prefix, "bin")
    path = [entry for entry in environment.get("PATH", "").split(os.pathsep) if entry != own_bin]
    environment.update(
        PATH=os.pathsep.join(path),
        HARNESS_TASK="tasks/ci-demo",
        HARNESS_HEAD_SHA=_git(checkout, "rev-parse", "HEAD"),
        HARNESS_BASE_SHA=_git(checkout, "rev-parse", "main"),
        TMPDIR=str(work),
        UV_OFFLINE="1",  # everything comes from uv's cache: no network in tests
        PYTHONDONTWRITEBYTECODE="1",
    )
    return subprocess.run(
        ["bash", "-c", f"set -euo pipefail\nstep() {{ :; }}\n{block}\n"],
        cwd=checkout,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def _report(checkout: Path) -> dict[str, object]:
    reports = sorted((checkout / "tasks" / "runs").glob("*/report.json"))
    assert len(reports) == 1
    return json.loads(reports[0].read_text())


def _branch(checkout: Path) -> None:
    """A fresh ``tasks/ci-demo`` at ``main``, without an earlier test's evidence or ``.venv``."""
    _git(checkout, "checkout", "-q", "-f", "-B", "tasks/ci-demo", "main")
    _git(checkout, "clean", "-fdxq")


@pytest.mark.slow
def test_the_ci_block_passes_a_branch_that_stays_in_scope(ci_checkout: Path, tmp_path: Path) -> None:
    _branch(ci_checkout)
    (ci_checkout / "docs" / "ci-demo.md").write_text("in scope\n")
    _git(ci_checkout, "add", "-A")
    _git(ci_checkout, "commit", "-q", "-m", "in scope")
    completed = _run_block(ci_checkout, tmp_path)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    report = _report(ci_checkout)
    assert report["status"] == "passed"
    tests = cast("dict[str, object]", report["tests"])
    assert (tests["command"], tests["total"], tests["passed"]) == ("uv run --frozen pytest", 1, 1)
    leftovers = [path.name for path in tmp_path.iterdir() if path.name.startswith("harness-exit-gate")]
    assert leftovers == [], "the base's tree, its environment and the script are removed afterwards"


@pytest.mark.slow
def test_the_ci_block_judges_with_the_bases_gate_even_when_the_head_rewrote_it(
    ci_checkout: Path, tmp_path: Path
) -> None:
    _branch(ci_checkout)
    run_module = ci_checkout / "tools" / "exit-gate" / "src" / "harness_exit_gate" / "_run.py"
    text = run_module.read_text()
    text = text.replace(
        "def run_gate(options: RunOptions) -> RunOutcome:\n",
        "def run_gate(options: RunOptions) -> RunOutcome:\n    raise SystemExit(0)\n",
    )
    run_module.write_text(text)
    (ci_checkout / ".ci" / "exit-gate").write_text("#!/usr/bin/env bash\nexit 0\n")
    manifest = ci_checkout / "tasks" / "ci-demo.yaml"
    manifest.write_text(manifest.read_text().replace('"docs/**"', '"**"'))
    (ci_checkout / "secret").mkdir()
    (ci_checkout / "secret" / "config.py").write_text("TOKEN = 'x'\n")
    # Had any of the branch's code run (its tests, its conftest), this file would exist.
    (ci_checkout / "conftest.py").write_text("open('BRANCH_CODE_RAN', 'w').close()\n")
    _git(ci_checkout, "add", "-A")
    _git(ci_checkout, "commit", "-q", "-m", "rewrite the judge")
    completed = _run_block(ci_checkout, tmp_path)
    assert completed.returncode == 1, completed.stdout[-3000:] + completed.stderr[-3000:]
    report = _report(ci_checkout)
    assert report["status"] == "blocked"
    failures = [failure["code"] for failure in cast("list[dict[str, str]]", report["failures"])]
    assert failures == ["PROTECTED_PATH_VIOLATION", "PATH_SCOPE_VIOLATION"]
    violations = cast("dict[str, list[str]]", report["policy"])["violations"]
    assert violations == [
        ".ci/exit-gate",
        "conftest.py",
        "secret/config.py",
        "tasks/ci-demo.yaml",
        "tools/exit-gate/src/harness_exit_gate/_run.py",
    ]
    assert not (ci_checkout / "BRANCH_CODE_RAN").exists()
    assert not (ci_checkout / ".venv").exists(), "the branch was never installed"
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith("harness-exit-gate")] == []
