"""The README's status table agrees with each distribution's version and changelog.

Each workspace member has one row: its folder, its distribution name, and a status cell
``**available** (VERSION)`` when the changelog's newest released entry is the version in its
``pyproject.toml``, or ``**available** (VERSION unreleased)`` when that version is still under
an unreleased entry. So a release, a version bump or a new distribution that the README does
not follow fails here instead of drifting.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parent.parent
_STATUS_WORDS = ("available", "in progress")
_VERSION = re.compile(r"\b(\d+\.\d+\.\d+)\b")
_ROW = re.compile(r"^\| `(?P<folder>[^`]+)` \| `(?P<name>[^`]+)` — .* \| (?P<status>[^|]+) \|$")
# Internal plan names never reach text users read: milestones ("M9") and issue numbers.
_PLAN_NAME = re.compile(r"\bM\d+\b|\bissue #\d+", re.IGNORECASE)


@dataclass(frozen=True)
class ChangelogState:
    """What a changelog says about releases."""

    newest_released: str | None
    unreleased_versions: frozenset[str]


def _members() -> list[str]:
    with (REPOSITORY / "pyproject.toml").open("rb") as file:
        return list(tomllib.load(file)["tool"]["uv"]["workspace"]["members"])


def _project(member: str) -> tuple[str, str]:
    with (REPOSITORY / member / "pyproject.toml").open("rb") as file:
        project = tomllib.load(file)["project"]
    return project["name"], project["version"]


def read_changelog(text: str) -> ChangelogState:
    """The newest released version and the versions named by unreleased entries.

    An entry is a ``## `` heading; one whose heading says "unreleased" (in any case) is not
    released, whatever version it names.
    """
    newest: str | None = None
    unreleased: set[str] = set()
    for line in text.splitlines():
        if not line.startswith("## "):
            continue
        found = _VERSION.search(line)
        if "unreleased" in line.lower():
            if found is not None:
                unreleased.add(found.group(1))
        elif found is not None and newest is None:
            newest = found.group(1)
    return ChangelogState(newest_released=newest, unreleased_versions=frozenset(unreleased))


def expected_version_cell(version: str, changelog: ChangelogState) -> str:
    """How the README must state ``version``, or a ``ValueError`` when the changelog cannot back it."""
    if changelog.newest_released == version:
        return f"({version})"
    if version in changelog.unreleased_versions:
        return f"({version} unreleased)"
    raise ValueError(
        f"version {version} is neither the changelog's newest released entry "
        f"({changelog.newest_released}) nor named by an unreleased entry"
    )


def _readme_rows() -> dict[str, tuple[str, str]]:
    rows: dict[str, tuple[str, str]] = {}
    for line in (REPOSITORY / "README.md").read_text(encoding="utf-8").splitlines():
        match = _ROW.match(line)
        if match is None:
            continue
        folder = match.group("folder")
        assert folder not in rows, f"the README's table has two rows for {folder}"
        rows[folder] = (match.group("name"), match.group("status").strip())
    return rows


def test_readme_table_has_one_row_per_workspace_member_and_no_other() -> None:
    assert sorted(_readme_rows()) == sorted(_members())


@pytest.mark.parametrize("member", _members())
def test_readme_row_states_the_distributions_name_version_and_release(member: str) -> None:
    name, version = _project(member)
    changelog = read_changelog((REPOSITORY / member / "CHANGELOG.md").read_text(encoding="utf-8"))
    row_name, status = _readme_rows()[member]
    assert row_name == name
    allowed = [f"**{word}** {expected_version_cell(version, changelog)}" for word in _STATUS_WORDS]
    assert status in allowed, f"{member}: the README says {status!r}; write {allowed[0]!r}"


def test_readme_names_no_milestone_or_issue_number() -> None:
    readme = (REPOSITORY / "README.md").read_text(encoding="utf-8")
    assert _PLAN_NAME.findall(readme) == []


def test_changelog_reading_tells_released_from_unreleased_entries() -> None:
    text = "# c\n\n## Unreleased (0.9.0)\n\n## 0.8.1 — a fix\n\n## 0.8.0\n"
    state = read_changelog(text)
    assert state == ChangelogState(newest_released="0.8.1", unreleased_versions=frozenset({"0.9.0"}))
    assert expected_version_cell("0.8.1", state) == "(0.8.1)"
    assert expected_version_cell("0.9.0", state) == "(0.9.0 unreleased)"
    assert read_changelog("## 0.1.0 (unreleased)\n").newest_released is None


def test_a_version_the_changelog_does_not_back_is_refused() -> None:
    state = read_changelog("## Unreleased\n\n## 0.2.0\n")
    with pytest.raises(ValueError, match=r"version 0\.3\.0 is neither"):
        expected_version_cell("0.3.0", state)
