"""Real git repositories in temp folders for the exit-gate tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness_exit_gate import main

PASSING = f"{sys.executable} -c pass"
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Gate Test",
    "GIT_AUTHOR_EMAIL": "gate@example.invalid",
    "GIT_COMMITTER_NAME": "Gate Test",
    "GIT_COMMITTER_EMAIL": "gate@example.invalid",
}


def manifest_text(task_id: str, *, allowed: Sequence[str], commands: dict[str, str]) -> str:
    lines = [
        f"id: {task_id}",
        "title: A test task",
        "goal: Prove the gate.",
        "acceptance:",
        "  - the gate passes",
        "allowed_paths:",
        *(f'  - "{path}"' for path in allowed),
        "permissions:",
        "  process.exec:",
        *(f"    {json.dumps(command)}: {effect}" for command, effect in commands.items()),
        '    "*": deny',
        "delivery:",
        "  type: pull_request",
    ]
    return "\n".join(lines) + "\n"


@dataclass
class Repo:
    """A repository whose ``main`` holds the task's manifest, with the task branch checked out.

    The gate enforces the base's manifest (docs/decisions/003), so the manifest lands on
    ``main`` first, and the branch adds one commit of its own (``src/feature.py``).
    """

    root: Path
    task_id: str

    def git(self, *arguments: str) -> str:
        completed = subprocess.run(
            ["git", *arguments],
            cwd=self.root,
            env={**os.environ, **_GIT_ENV},
            capture_output=True,
            text=True,
            check=True,
        )
        return completed.stdout.strip()

    def write(self, path: str, text: str) -> None:
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def commit(self, message: str = "change") -> None:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)

    @property
    def manifest(self) -> str:
        return f"tasks/{self.task_id}.yaml"

    def gate(
        self,
        *options: str,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
        manifest: str | None = None,
    ) -> tuple[int, dict[str, object], str]:
        """Run the gate from the root on ``manifest`` (the task's own by default)."""
        monkeypatch.chdir(self.root)
        status = main(["run", self.manifest if manifest is None else manifest, *options])
        captured = capsys.readouterr()
        body, _, _ = captured.out.rpartition("\n}\n")
        report: dict[str, object] = json.loads(body + "\n}\n")
        return status, report, captured.out + captured.err


def make_repo(
    root: Path,
    *,
    task_id: str = "demo-task",
    allowed: Sequence[str] = ("src/**", "tasks/demo-task.yaml"),
    commands: dict[str, str] | None = None,
) -> Repo:
    root.mkdir(parents=True, exist_ok=True)
    repo = Repo(root, task_id)
    repo.git("init", "-q", "-b", "main")
    repo.write(".gitignore", "tasks/runs/\n.venv/\n__pycache__/\nbuild/\n")
    repo.write("src/app.py", "VALUE = 1\n")
    repo.write("docs/readme.md", "docs\n")
    repo.commit("base")
    repo.write(
        f"tasks/{task_id}.yaml",
        manifest_text(task_id, allowed=allowed, commands=commands or {PASSING: "allow"}),
    )
    repo.commit("manifest")
    repo.git("checkout", "-q", "-b", f"tasks/{task_id}")
    repo.write("src/feature.py", "FEATURE = True\n")
    repo.commit("feature")
    return repo


class RepoFactory:
    """Builds repositories; tests reach the helpers through fixtures (importlib mode)."""

    passing = PASSING
    manifest_text = staticmethod(manifest_text)

    def __init__(self, base: Path) -> None:
        self._base = base
        self._count = 0

    def __call__(
        self,
        *,
        task_id: str = "demo-task",
        allowed: Sequence[str] | None = None,
        commands: dict[str, str] | None = None,
    ) -> Repo:
        self._count += 1
        paths = allowed if allowed is not None else ("src/**", f"tasks/{task_id}.yaml")
        return make_repo(self._base / f"repo{self._count}", task_id=task_id, allowed=paths, commands=commands)


@pytest.fixture
def repos(tmp_path: Path) -> RepoFactory:
    return RepoFactory(tmp_path)


@pytest.fixture
def repo(repos: RepoFactory) -> Repo:
    return repos()
