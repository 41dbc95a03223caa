#!/usr/bin/env python3
"""Fail when a member's declared range for a sibling excludes the sibling's actual version.

Inside the workspace uv resolves every member from its source (``workspace = true``) and
ignores the version ranges members declare for one another, so a stale range
(``harness-workspace>=0.8,<0.9`` after harness-workspace moved to 0.9.0) goes unnoticed
until a downstream team installs the published wheels and the resolver refuses. This check
reads ``[tool.uv.workspace].members`` from the root ``pyproject.toml`` and, for every
member, every requirement on another member in ``[project].dependencies`` and
``[project].optional-dependencies``; it fails when

- the requirement has no version range at all (a downstream pin needs one), or
- the range excludes the sibling's ``[project].version``.

Standard library only (the script runs before anything is installed). Versions and
specifiers are the subset of PEP 440 the members use: release segments (``1``, ``0.8.0``)
and the operators ``==`` (with ``.*``), ``!=``, ``<``, ``<=``, ``>``, ``>=`` and ``~=``.
Anything else (pre-, post-, dev- or local versions, ``===``, URLs) is reported as an error
rather than guessed at.

Usage: ``python3 .ci/check_dependency_ranges.py [ROOT]`` (default: the repository root)
or ``python3 .ci/check_dependency_ranges.py --self-test``.
"""

from __future__ import annotations

import re
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

_RELEASE = re.compile(r"^v?(\d+(?:\.\d+)*)$")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")
_CLAUSE = re.compile(r"^(===|==|!=|<=|>=|~=|<|>)\s*(\S+)$")


class SpecError(ValueError):
    """A version or specifier outside the supported PEP 440 subset."""


def normalize_name(name: str) -> str:
    """PEP 503 normalization: ``Harness_Workspace`` and ``harness-workspace`` are one name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_release(text: str) -> tuple[int, ...]:
    match = _RELEASE.match(text.strip())
    if match is None:
        raise SpecError(f"unsupported version {text!r} (only release segments such as 0.8.0)")
    return tuple(int(part) for part in match.group(1).split("."))


def _padded(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)), b + (0,) * (width - len(b))


def _compare(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    left, right = _padded(a, b)
    return (left > right) - (left < right)


def clause_contains(operator: str, operand: str, version: tuple[int, ...]) -> bool:
    """Whether ``version`` satisfies one clause such as ``>=0.8`` or ``==0.8.*``."""
    if operator in ("==", "!=") and operand.endswith(".*"):
        prefix = parse_release(operand[:-2])
        padded_version = version + (0,) * max(0, len(prefix) - len(version))
        matches = padded_version[: len(prefix)] == prefix
        return matches if operator == "==" else not matches
    if operator == "===":
        raise SpecError("'===' (arbitrary equality) is not supported")
    target = parse_release(operand)
    order = _compare(version, target)
    if operator == "==":
        return order == 0
    if operator == "!=":
        return order != 0
    if operator == "<":
        return order < 0
    if operator == "<=":
        return order <= 0
    if operator == ">":
        return order > 0
    if operator == ">=":
        return order >= 0
    # "~=": at least the target, and the same release up to the target's last-but-one part.
    if len(target) < 2:
        raise SpecError(f"'~={operand}' needs at least two release segments")
    prefix = target[:-1]
    padded_version = version + (0,) * max(0, len(prefix) - len(version))
    return order >= 0 and padded_version[: len(prefix)] == prefix


@dataclass(frozen=True)
class Requirement:
    name: str  # normalized
    clauses: tuple[tuple[str, str], ...]
    text: str

    def contains(self, version: tuple[int, ...]) -> bool:
        return all(clause_contains(op, operand, version) for op, operand in self.clauses)


def parse_requirement(text: str) -> Requirement:
    """``name[extras] (specifiers) ; marker`` with the marker ignored (it limits *where*, not *which*)."""
    requirement = text.split(";", 1)[0]
    match = _NAME.match(requirement)
    if match is None:
        raise SpecError(f"cannot read requirement {text!r}")
    name, _extras, rest = match.groups()
    rest = rest.strip()
    if rest.startswith("@"):
        raise SpecError(f"{text!r}: a direct URL reference cannot be published as a range")
    if rest.startswith("(") and rest.endswith(")"):
        rest = rest[1:-1]
    clauses: list[tuple[str, str]] = []
    for raw in filter(None, (part.strip() for part in rest.split(","))):
        clause = _CLAUSE.match(raw)
        if clause is None:
            raise SpecError(f"{text!r}: cannot read the specifier {raw!r}")
        operator, operand = clause.groups()
        clause_contains(operator, operand, (0,))  # validates the operand now, not on use
        clauses.append((operator, operand))
    return Requirement(normalize_name(name), tuple(clauses), text.strip())


@dataclass(frozen=True)
class Member:
    path: Path
    name: str  # normalized
    version: str
    requirements: tuple[str, ...]


def load_members(root: Path) -> list[Member]:
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config.get("tool", {}).get("uv", {}).get("workspace", {}).get("members", [])
    if not patterns:
        raise SystemExit(f"{root / 'pyproject.toml'}: no [tool.uv.workspace].members")
    members: list[Member] = []
    for pattern in patterns:
        for folder in sorted(root.glob(pattern)):
            pyproject = folder / "pyproject.toml"
            if not pyproject.is_file():
                continue
            project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
            requirements = list(project.get("dependencies", []))
            for extra in project.get("optional-dependencies", {}).values():
                requirements.extend(extra)
            if "version" not in project:
                raise SystemExit(f"{pyproject}: [project].version must be static for this check")
            members.append(
                Member(
                    folder.relative_to(root),
                    normalize_name(project["name"]),
                    project["version"],
                    tuple(requirements),
                )
            )
    return members


def check(root: Path) -> list[str]:
    """Every problem found, as one line each; an empty list means every range is sound."""
    members = load_members(root)
    versions = {member.name: member.version for member in members}
    problems: list[str] = []
    for member in members:
        for text in member.requirements:
            where = f"{member.path}/pyproject.toml: {member.name} requires {text!r}"
            try:
                requirement = parse_requirement(text)
                if requirement.name not in versions or requirement.name == member.name:
                    continue
                actual = versions[requirement.name]
                if not requirement.clauses:
                    problems.append(f"{where}: no version range for a sibling ({actual}); add one")
                elif not requirement.contains(parse_release(actual)):
                    problems.append(f"{where}, which excludes {requirement.name} {actual}, its version")
            except SpecError as error:
                if _mentions_sibling(text, versions):
                    problems.append(f"{where}: {error}")
    return problems


def _mentions_sibling(text: str, versions: dict[str, str]) -> bool:
    match = _NAME.match(text.split(";", 1)[0])
    return match is not None and normalize_name(match.group(1)) in versions


# ---------------------------------------------------------------- self-test


def _write_workspace(root: Path, members: dict[str, tuple[str, list[str]]]) -> None:
    names = ", ".join(f'"m/{folder}"' for folder in members)
    (root / "pyproject.toml").write_text(f"[tool.uv.workspace]\nmembers = [{names}]\n", encoding="utf-8")
    for folder, (version, deps) in members.items():
        (root / "m" / folder).mkdir(parents=True)
        listed = ", ".join(f'"{dep}"' for dep in deps)
        (root / "m" / folder / "pyproject.toml").write_text(
            f'[project]\nname = "{folder}"\nversion = "{version}"\ndependencies = [{listed}]\n',
            encoding="utf-8",
        )


def self_test() -> int:
    contains = [
        ("harness-workspace>=0.8,<0.9", "0.8.0", True),
        ("harness-workspace>=0.8,<0.9", "0.8.7", True),
        ("harness-workspace>=0.8,<0.9", "0.9.0", False),
        ("harness-workspace>=0.8,<0.9", "0.7.9", False),
        ("harness-workspace ~=0.8.0", "0.8.3", True),
        ("harness-workspace ~=0.8.0", "0.9.0", False),
        ("harness-workspace~=0.8", "0.9.1", True),
        ("harness-workspace~=0.8", "1.0", False),
        ("harness-workspace==0.8.*", "0.8.5", True),
        ("harness-workspace==0.8.*", "0.80.0", False),
        ("harness-workspace!=0.8.1,>=0.8", "0.8.1", False),
        ("harness-workspace==0.8", "0.8.0", True),
        ("harness-workspace>0.8", "0.8.0", False),
        ("harness-workspace<=0.8", "0.8.0", True),
        ("Harness_Workspace[extra] (>=1,<2) ; python_version >= '3.11'", "1.4", True),
    ]
    failures: list[str] = []
    cases_run = 0
    for text, version, expected in contains:
        cases_run += 1
        got = parse_requirement(text).contains(parse_release(version))
        if got != expected:
            failures.append(f"{text!r} contains {version}: expected {expected}, got {got}")
    for bad in ("harness-workspace>=0.8rc1", "harness-workspace===0.8", "harness-workspace~=1"):
        cases_run += 1
        try:
            parse_requirement(bad)
            failures.append(f"{bad!r}: accepted, expected a SpecError")
        except SpecError:
            pass
    cases: dict[str, tuple[dict[str, tuple[str, list[str]]], int]] = {
        "sound ranges": ({"a": ("0.9.0", []), "b": ("0.1.0", ["a>=0.9,<0.10", "msgspec"])}, 0),
        "stale range": ({"a": ("0.9.0", []), "b": ("0.1.0", ["a>=0.8,<0.9"])}, 1),
        "no range": ({"a": ("0.9.0", []), "b": ("0.1.0", ["a"])}, 1),
        "unsupported": ({"a": ("0.9.0", []), "b": ("0.1.0", ["a @ file:///a"])}, 1),
        "third party ignored": ({"b": ("0.1.0", ["trio @ https://x/trio.whl", "msgspec>=99"])}, 0),
    }
    for label, (members, expected_problems) in cases.items():
        cases_run += 1
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            _write_workspace(root, members)
            problems = check(root)
            if len(problems) != expected_problems:
                failures.append(f"{label}: expected {expected_problems} problem(s), got {problems}")
    for failure in failures:
        print(f"self-test FAILED: {failure}", file=sys.stderr)
    if not failures:
        print(f"check_dependency_ranges self-test: {cases_run} cases passed")
    return 1 if failures else 0


def main(argv: list[str]) -> int:
    if argv == ["--self-test"]:
        return self_test()
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent
    problems = check(root)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if problems:
        print(
            f"{len(problems)} internal dependency range(s) exclude or omit a sibling's version; "
            "uv ignores these ranges inside the workspace, but pip and downstream resolvers do not",
            file=sys.stderr,
        )
        return 1
    members = load_members(root)
    versions = {member.name: member.version for member in members}
    checked = sum(_mentions_sibling(text, versions) for member in members for text in member.requirements)
    print(f"dependency ranges: {checked} internal requirement(s) include their sibling's version")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
