"""Step 6: the contract pin holds while the index also offers the next contract.

A next contract (harness-workspace ``N.M+1.0``, ``WORKSPACE_CONTRACT_VERSION`` ``"N.M+1"``) is
built from a temp copy and published *after* every other check, so the index offers both
contracts. harness-tools declares ``harness-workspace>=N.M,<N.M+1``: alone it must still get
the current line, and a requirement set mixing it with the next contract (or the previous one)
must fail at resolution time with a message that names the pin. Every version is read from
the tree, so a version bump needs no edit here.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ._distributions import Distribution, by_name
from ._index import PrivateIndex
from ._shell import StageFailure, make_venv, output_of, run, run_logged, step, uv, venv_bin

_VERSION_MODULE: Final = "src/harness_workspace/_version.py"
_CONTRACT: Final = re.compile(r'^WORKSPACE_CONTRACT_VERSION: Final = "(\d+)\.(\d+)"$', re.MULTILINE)
_PIP_SAYS: Final = re.compile(r"harness-workspace|harness-tools|ResolutionImpossible")
_PIP_LINES_SHOWN: Final = 8


@dataclass(frozen=True)
class ContractLines:
    """The workspace contract in the tree (``current``) and its neighbours, as ``major.minor``."""

    current: str
    next: str
    previous: str

    @property
    def next_version(self) -> str:
        """The test-only distribution version that implements the next contract."""
        return f"{self.next}.0"


def contract_lines(repo: Path, workspace: Distribution) -> ContractLines:
    """Read ``WORKSPACE_CONTRACT_VERSION`` from harness-workspace's source.

    Raises:
        StageFailure: the line is not found exactly once, or the contract has no previous
            minor line (``N.0``) to mix with.
    """
    text = (repo / workspace.folder / _VERSION_MODULE).read_text()
    found = _CONTRACT.findall(text)
    if len(found) != 1:
        raise StageFailure(f"{workspace.folder}/{_VERSION_MODULE}: no single WORKSPACE_CONTRACT_VERSION line")
    major, minor = (int(part) for part in found[0])
    if minor == 0:
        raise StageFailure(f"contract {major}.0 has no previous minor line: adapt {__file__} to mix another")
    return ContractLines(f"{major}.{minor}", f"{major}.{minor + 1}", f"{major}.{minor - 1}")


def _replace_line(path: Path, old: str, new: str, what: str) -> None:
    lines = path.read_text().splitlines(keepends=True)
    hits = [index for index, line in enumerate(lines) if line.rstrip("\n") == old]
    if len(hits) != 1:
        raise StageFailure(f"could not make {what}: {path} has {len(hits)} lines {old!r}")
    lines[hits[0]] = f"{new}\n"
    path.write_text("".join(lines))


def _build_next(repo: Path, work: Path, workspace: Distribution, lines: ContractLines) -> Path:
    """A wheel of harness-workspace at the next contract, built from a temp copy without tests."""
    source = repo / workspace.folder
    copy = work / f"workspace-{lines.next}"

    def left_out(folder: str, names: list[str]) -> list[str]:
        return ["tests"] if Path(folder) == source and "tests" in names else []

    shutil.copytree(source, copy, ignore=left_out)
    what = f"{workspace.name} {lines.next_version}"
    _replace_line(
        copy / "pyproject.toml", f'version = "{workspace.version}"', f'version = "{lines.next_version}"', what
    )
    contract = "WORKSPACE_CONTRACT_VERSION: Final = "
    _replace_line(copy / _VERSION_MODULE, f'{contract}"{lines.current}"', f'{contract}"{lines.next}"', what)
    out = work / "dist-next"
    run(uv("build", "--wheel", "--out-dir", out, "--quiet", copy), cwd=repo)
    return out / f"{workspace.module}-{lines.next_version}-py3-none-any.whl"


def _check_tools_alone(
    work: Path, index: PrivateIndex, workspace: Distribution, lines: ContractLines
) -> None:
    venv = make_venv(work / "venv-pinned")
    run(index.pip_install(venv, "harness-tools"))
    probe = "import harness_workspace as w; print(w.__version__, w.WORKSPACE_CONTRACT_VERSION)"
    got = output_of([venv_bin(venv, "python"), "-c", probe], cwd=work).strip()
    if got != f"{workspace.version} {lines.current}":
        raise StageFailure(
            f"harness-tools alone pulled in harness-workspace {got},"
            f" not {workspace.version} (contract {lines.current})"
        )
    print(
        f"  harness-tools alone, with {lines.next_version} on the index:"
        f" harness-workspace {workspace.version} (contract {lines.current})"
    )


def _check_mixed_refused(
    work: Path, index: PrivateIndex, label: str, mention: str, *requirements: str
) -> None:
    """In a fresh venv pip must refuse ``requirements`` before installing, naming ``mention``."""
    venv = work / "venv-mixed"
    shutil.rmtree(venv, ignore_errors=True)
    make_venv(venv)
    log = work / "mixed.txt"
    status = run_logged(index.pip_install(venv, *requirements, quiet=False), log, errors_too=True)
    said = log.read_text(errors="replace")
    if status == 0:
        print(said)
        raise StageFailure(f"{label}: pip installed {' '.join(requirements)}")
    if mention not in said:
        print(said)
        raise StageFailure(f"{label}: '{mention}' not named")
    probe = [venv_bin(venv, "python"), "-c", "import harness_workspace"]
    if run_logged(probe, work / "mixed-import.txt", errors_too=True) == 0:
        raise StageFailure(f"{label}: harness-workspace was installed anyway")
    print(f"  {label}: refused at resolution, nothing installed; pip says:")
    for line in [line for line in said.splitlines() if _PIP_SAYS.search(line)][:_PIP_LINES_SHOWN]:
        print(f"    | {line}")


def check_contract_pin(
    repo: Path, work: Path, index: PrivateIndex, distributions: tuple[Distribution, ...], lines: ContractLines
) -> None:
    """Publish the next contract, then check harness-tools' pin alone and mixed.

    Raises:
        StageFailure: the next contract cannot be built or published, harness-tools alone
            gets another harness-workspace, or pip accepts a mixed requirement set.
    """
    step("mixing contract versions fails at resolution and names the pin")
    workspace, tools = by_name(distributions, "harness-workspace"), by_name(distributions, "harness-tools")
    wheel = _build_next(repo, work, workspace, lines)
    answer = index.publish(wheel)
    if answer.status != 200:
        raise StageFailure(f"publishing {workspace.name} {lines.next_version}: HTTP {answer}")
    print(f"published {wheel.name} (contract {lines.next}, test only)")
    _check_tools_alone(work, index, workspace, lines)
    pinned = f"harness-tools=={tools.version}"
    ceiling = f"harness-workspace<{lines.next}"
    for label, mention, mixed in (
        (f"{pinned} + harness-workspace>={lines.next}", ceiling, f"harness-workspace>={lines.next}"),
        (
            f"{pinned} + harness-workspace=={lines.next_version}",
            ceiling,
            f"harness-workspace=={lines.next_version}",
        ),
        (
            f"{pinned} + harness-workspace=={lines.previous}.*",
            f"harness-workspace=={lines.previous}.*",
            f"harness-workspace=={lines.previous}.*",
        ),
    ):
        _check_mixed_refused(work, index, label, mention, pinned, mixed)
