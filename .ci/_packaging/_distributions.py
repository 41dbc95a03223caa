"""The project's distributions as the packaging stage sees them: names, folders, versions, closures.

Versions are read from each member's ``pyproject.toml``, so a version bump needs no edit here.
What *is* written here is architecture the stage asserts: which project distributions a lone
install of each one must bring (the dependency direction workspace <- tools <- kernel <-
agent-server), and that this table covers exactly the workspace's members.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ._shell import StageFailure

# name, folder, the project distributions a lone install of it brings (itself first)
_LAYOUT: Final = (
    ("harness-workspace", "packages/workspace", ("harness-workspace",)),
    ("harness-tools", "packages/tools", ("harness-tools", "harness-workspace")),
    ("harness-kernel", "packages/kernel", ("harness-kernel", "harness-tools", "harness-workspace")),
    ("harness-sandbox", "packages/sandbox", ("harness-sandbox", "harness-workspace")),
    (
        "harness-models",
        "packages/models",
        ("harness-models", "harness-kernel", "harness-tools", "harness-workspace"),
    ),
    (
        "harness-store-postgres",
        "packages/store-postgres",
        ("harness-store-postgres", "harness-kernel", "harness-tools", "harness-workspace"),
    ),
    (
        "agent-server",
        "services/agent-server",
        (
            "agent-server",
            "harness-exit-gate",
            "harness-kernel",
            "harness-models",
            "harness-sandbox",
            "harness-tools",
            "harness-workspace",
        ),
    ),
    ("harness-import-boundary", "tools/import-boundary", ("harness-import-boundary",)),
    (
        "harness-exit-gate",
        "tools/exit-gate",
        ("harness-exit-gate", "harness-kernel", "harness-tools", "harness-workspace"),
    ),
)


@dataclass(frozen=True)
class Distribution:
    """One of the project's distributions, at the version its ``pyproject.toml`` declares."""

    name: str
    folder: str
    version: str
    closure: tuple[str, ...]

    @property
    def module(self) -> str:
        """The import name (``harness-workspace`` -> ``harness_workspace``)."""
        return self.name.replace("-", "_")

    @property
    def stem(self) -> str:
        """``module-version``, the start of its wheel's and sdist's file names."""
        return f"{self.module}-{self.version}"

    @property
    def wheel(self) -> str:
        """The built wheel's file name."""
        return f"{self.stem}-py3-none-any.whl"

    @property
    def sdist(self) -> str:
        """The built sdist's file name."""
        return f"{self.stem}.tar.gz"


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise StageFailure(f"cannot read {path}: {error}") from error


def _workspace_members(repo: Path) -> set[str]:
    workspace = _read_toml(repo / "pyproject.toml").get("tool", {}).get("uv", {}).get("workspace", {})
    patterns: list[str] = list(workspace.get("members", []))
    return {
        folder.relative_to(repo).as_posix()
        for pattern in patterns
        for folder in repo.glob(pattern)
        if (folder / "pyproject.toml").is_file()
    }


def load_distributions(repo: Path) -> tuple[Distribution, ...]:
    """Every distribution of the workspace at ``repo``, in dependency order.

    Raises:
        StageFailure: a member this stage does not know (or a known one that is no longer a
            member), or a ``pyproject.toml`` whose name differs or whose version is not static.
    """
    members = _workspace_members(repo)
    known = {folder for _, folder, _ in _LAYOUT}
    if members != known:
        unknown = ", ".join(sorted(members - known)) or "none"
        gone = ", ".join(sorted(known - members)) or "none"
        raise StageFailure(
            f"the workspace members and the packaging stage's table differ (members it does not know:"
            f" {unknown}; known folders that are not members: {gone}); update {__file__}"
        )
    distributions: list[Distribution] = []
    for name, folder, closure in _LAYOUT:
        project = _read_toml(repo / folder / "pyproject.toml").get("project", {})
        version = project.get("version")
        if project.get("name") != name or not isinstance(version, str):
            raise StageFailure(
                f"{folder}/pyproject.toml: expected [project] name {name!r} with a static version,"
                f" found name {project.get('name')!r} and version {version!r}"
            )
        distributions.append(Distribution(name, folder, version, closure))
    return tuple(distributions)


def by_name(distributions: tuple[Distribution, ...], name: str) -> Distribution:
    """The distribution called ``name`` (a name from this module's table)."""
    (found,) = [distribution for distribution in distributions if distribution.name == name]
    return found
