"""Step 4: each distribution installed alone, from the private index only, in a fresh venv.

Each install asserts that exactly its own closure of project distributions is installed, at
the built versions, and imported from the venv (never the source tree); then it proves the
distribution works on its own, from a temp working directory.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ._distributions import Distribution
from ._index import PrivateIndex
from ._shell import Argument, StageFailure, make_venv, output_of, run, run_logged, step, succeeds, venv_bin

_PROBES: Final = Path(__file__).resolve().parent / "probes"
_BOOTSTRAP: Final = frozenset({"pip", "setuptools", "wheel"})  # python3 -m venv's own, not installed by us


@dataclass(frozen=True)
class LoneInstall:
    """A venv holding one distribution installed alone, and a working directory beside it."""

    venv: Path
    cwd: Path

    def program(self, name: str) -> Path:
        """The path of an installed program (``python``, ``agent-server``, ...)."""
        return venv_bin(self.venv, name)

    def _argv(self, command: tuple[Argument, ...]) -> list[Argument]:
        return [self.program(str(command[0])), *command[1:]]

    def run(self, *command: Argument) -> None:
        """Run an installed program from the working directory (see :func:`._shell.run`)."""
        run(self._argv(command), cwd=self.cwd)

    def succeeds(self, *command: Argument) -> bool:
        """Whether an installed program exits 0 (for the commands that must fail)."""
        return succeeds(self._argv(command), cwd=self.cwd)

    def output(self, log: Path, label: str, *command: Argument) -> str:
        """Run an installed program with its output in ``log``; that output.

        Raises:
            StageFailure: ``label``, once the output is printed, when it exits non-zero.
        """
        if run_logged(self._argv(command), log, cwd=self.cwd) != 0:
            print(log.read_text(errors="replace"))
            raise StageFailure(label)
        return log.read_text(errors="replace")


@dataclass(frozen=True)
class Installer:
    """Makes lone installs from the private index, checked against the built distributions."""

    work: Path
    index: PrivateIndex
    distributions: tuple[Distribution, ...]

    def alone(self, name: str) -> LoneInstall:
        """A fresh venv holding ``name`` from the private index alone, its closure checked.

        Raises:
            StageFailure: pip fails, or the installed project dists, their versions or the
                place they import from are not what was built.
        """
        lone = LoneInstall(self.work / f"venv-{name}", self.work / f"cwd-{name}")
        lone.cwd.mkdir(parents=True, exist_ok=True)
        make_venv(lone.venv)
        run(self.index.pip_install(lone.venv, name))
        self._check_closure(lone, name)
        return lone

    def _check_closure(self, lone: LoneInstall, name: str) -> None:
        (distribution,) = [candidate for candidate in self.distributions if candidate.name == name]
        built = {candidate.name: candidate for candidate in self.distributions}
        listed = json.loads(output_of([lone.program("pip"), "list", "--format=json"]))
        installed = {str(item["name"]).lower().replace("_", "-"): str(item["version"]) for item in listed}
        ours = {project: version for project, version in installed.items() if project in built}
        if sorted(ours) != sorted(distribution.closure):
            expected = sorted(distribution.closure)
            raise StageFailure(f"project dists installed: {sorted(ours)}, expected exactly {expected}")
        for project, version in ours.items():
            if version != built[project].version:
                raise StageFailure(f"{project} {version} installed, {built[project].version} was built")
            module = built[project].module
            probe = f"import {module}; print({module}.__file__)"
            origin = output_of([lone.program("python"), "-c", probe], cwd=self.work).strip()
            if not Path(origin).resolve().is_relative_to(lone.venv.resolve()):
                raise StageFailure(f"{module} imported from {origin}, not from the venv")
        others = sorted(f"{n}=={v}" for n, v in installed.items() if n not in ours and n not in _BOOTSTRAP)
        print(f"  project dists: {', '.join(f'{n}=={v}' for n, v in sorted(ours.items()))}")
        print(f"  third party:   {', '.join(others)}")


def _lines(text: str) -> int:
    return text.count("\n")


def _last_line(text: str) -> str:
    lines = text.splitlines()
    return lines[-1] if lines else ""


def _workspace_alone(installer: Installer, repo: Path) -> None:
    step("harness-workspace alone: imports, runs its in-memory example")
    lone = installer.alone("harness-workspace")
    contract = (
        "import harness_workspace as w; print('  WORKSPACE_CONTRACT_VERSION', w.WORKSPACE_CONTRACT_VERSION)"
    )
    lone.run("python", "-c", contract)
    demo_log = installer.work / "workspace-demo.txt"
    demo = lone.output(demo_log, "python -m harness_workspace", "python", "-m", "harness_workspace")
    print(f"  python -m harness_workspace: exit 0, {_lines(demo)} lines")
    (lone.cwd / "note.txt").write_text("from the wheel\n")
    if not lone.succeeds("python", _PROBES / "local_workspace_read.py"):
        raise StageFailure("LocalWorkspace from the installed wheel")


def _tools_alone(installer: Installer, repo: Path) -> None:
    step("harness-tools alone: pulls in only harness-workspace")
    installer.alone("harness-tools").run("python", "-c", "import harness_tools")


def _kernel_alone(installer: Installer, repo: Path) -> None:
    step("harness-kernel alone: pulls in harness-workspace and harness-tools")
    installer.alone("harness-kernel").run("python", "-c", "import harness_kernel")


def _models_alone(installer: Installer, repo: Path) -> None:
    step("harness-models alone: pulls in the kernel chain and httpx; imports")
    installer.alone("harness-models").run("python", "-c", "import harness_models")


def _sandbox_alone(installer: Installer, repo: Path) -> None:
    step("harness-sandbox alone: pulls in only harness-workspace; a SandboxWorkspace on bubblewrap")
    lone = installer.alone("harness-sandbox")
    (lone.cwd / "source").mkdir(parents=True, exist_ok=True)
    (lone.cwd / "source" / "note.txt").write_text("from the wheel\n")
    if not lone.succeeds("python", _PROBES / "sandbox_bubblewrap.py"):
        raise StageFailure("SandboxWorkspace on bubblewrap from the installed wheel")


def _store_postgres_alone(installer: Installer, repo: Path) -> None:
    step("harness-store-postgres alone: pulls in the kernel chain and psycopg; imports")
    installer.alone("harness-store-postgres").run(
        "python", "-c", "import harness_store_postgres, psycopg; print(psycopg.pq.__impl__)"
    )


def _agent_server_alone(installer: Installer, repo: Path) -> None:
    step("agent-server alone: pulls in the chain, agent-server demo runs from the installed wheels")
    lone = installer.alone("agent-server")
    demo = lone.output(installer.work / "agent-server-demo.txt", "agent-server demo", "agent-server", "demo")
    print(f"  agent-server demo: exit 0, {_lines(demo)} lines; last: {_last_line(demo)}")


def _import_boundary_alone(installer: Installer, repo: Path) -> None:
    step("harness-import-boundary alone: --version, check on a tiny tree")
    lone = installer.alone("harness-import-boundary")
    (lone.cwd / "src").mkdir(parents=True, exist_ok=True)
    (lone.cwd / "src" / "clean.py").write_text("import trio\n")
    (lone.cwd / "src" / "host.py").write_text("import subprocess\n")
    lone.run("harness-import-boundary", "--version")
    lone.run("harness-import-boundary", "check", "--no-cache", "src/clean.py")
    print("  expected next: one IB001 finding and a non-zero exit for 'import subprocess'")
    if lone.succeeds("harness-import-boundary", "check", "--no-cache", "src/host.py"):
        raise StageFailure("harness-import-boundary accepted 'import subprocess'")


def _exit_gate_alone(installer: Installer, repo: Path) -> None:
    step("harness-exit-gate alone: validate manifests, golden scenarios through harness-eval")
    lone = installer.alone("harness-exit-gate")
    tasks = lone.cwd / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    for manifest in sorted((repo / "tasks").glob("*.yaml")):
        shutil.copy(manifest, tasks / manifest.name)
    shutil.copytree(repo / "tasks" / "scenarios", tasks / "scenarios")
    output_of([lone.program("harness-exit-gate"), "--help"], cwd=lone.cwd)
    manifests = [f"tasks/{path.name}" for path in sorted(tasks.glob("*.yaml"))]
    lone.run("harness-exit-gate", "validate", *manifests)
    evaluated = lone.output(installer.work / "eval.txt", "harness-eval", "harness-eval", "--root", ".")
    print(f"  harness-eval: exit 0; last: {_last_line(evaluated)}")


_SMOKES: Final[dict[str, Callable[[Installer, Path], None]]] = {
    "harness-workspace": _workspace_alone,
    "harness-tools": _tools_alone,
    "harness-kernel": _kernel_alone,
    "harness-sandbox": _sandbox_alone,
    "harness-models": _models_alone,
    "harness-store-postgres": _store_postgres_alone,
    "agent-server": _agent_server_alone,
    "harness-import-boundary": _import_boundary_alone,
    "harness-exit-gate": _exit_gate_alone,
}


def check_lone_installs(
    repo: Path, work: Path, index: PrivateIndex, distributions: tuple[Distribution, ...]
) -> None:
    """Install every distribution alone from ``index`` and prove it works on its own.

    Raises:
        StageFailure: a distribution has no such check here, or an install, its closure or
            one of its smoke runs fails.
    """
    installer = Installer(work, index, distributions)
    for distribution in distributions:
        smoke = _SMOKES.get(distribution.name)
        if smoke is None:
            raise StageFailure(f"no lone-install check for {distribution.name}: add one to {__file__}")
        smoke(installer, repo)
