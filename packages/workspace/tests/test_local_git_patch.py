"""The patch text: random edit scripts give patches that ``git apply`` turns into the work tree.

The line diff is checked on its own too: the lines it leaves unchanged are the same on both
sides, and it changes no more lines than a longest common subsequence allows.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from workspace_git_repositories import clean_copy, commit_all, git, init, workspace_diff

from harness_workspace.local._git.bounds import Budget, ReaderLimits
from harness_workspace.local._git.patch import line_changes

LINES = st.sampled_from(["a\n", "b\n", "c\n", "\n", "  indented\n", "def f():\n", "café\n", "}\n"])


@st.composite
def edited_file(draw: st.DrawFn) -> tuple[str, str]:
    """A file and an edited version of it: insertions, deletions, replacements, final newline."""
    before = draw(st.lists(LINES, max_size=40))
    after = list(before)
    for _ in range(draw(st.integers(0, 6))):
        position = draw(st.integers(0, len(after)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        if action == "insert":
            after[position:position] = draw(st.lists(LINES, min_size=1, max_size=5))
        elif after:
            end = min(len(after), position + draw(st.integers(1, 4)))
            replacement = draw(st.lists(LINES, max_size=4)) if action == "replace" else []
            after[position:end] = replacement
    text_before, text_after = "".join(before), "".join(after)
    if draw(st.booleans()):
        text_before = text_before.rstrip("\n")
    if draw(st.booleans()):
        text_after = text_after.rstrip("\n")
    return text_before, text_after


def check_patch_applies(root: Path, scratch: Path, files: list[tuple[str, str]]) -> None:
    for number, (before, _) in enumerate(files):
        (root / f"f{number}.txt").write_text(before)
    commit_all(root)
    for number, (_, after) in enumerate(files):
        (root / f"f{number}.txt").write_text(after)

    patch = trio.run(workspace_diff, root)

    copy = clean_copy(root, scratch)
    git(copy, "reset", "--quiet", "--hard")
    if patch:
        git(copy, "apply", "-", stdin=patch.encode())
    for number, (_, after) in enumerate(files):
        assert (copy / f"f{number}.txt").read_text() == after
    assert bool(patch) == any(before != after for before, after in files)


def run_property(base: Path, files: list[tuple[str, str]]) -> None:
    shutil.rmtree(base, ignore_errors=True)
    check_patch_applies(init(base / "repo"), base / "copy", files)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(files=st.lists(edited_file(), min_size=1, max_size=3))
def test_random_edit_scripts_give_patches_git_applies(
    tmp_path_factory: pytest.TempPathFactory, files: list[tuple[str, str]]
) -> None:
    run_property(tmp_path_factory.getbasetemp() / "edits", files)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(files=st.lists(edited_file(), min_size=1, max_size=4))
def test_many_random_edit_scripts_give_patches_git_applies(
    tmp_path_factory: pytest.TempPathFactory, files: list[tuple[str, str]]
) -> None:
    run_property(tmp_path_factory.getbasetemp() / "many-edits", files)


def longest_common_subsequence(a: list[str], b: list[str]) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        previous_diagonal = 0
        for j, y in enumerate(b, start=1):
            current = row[j]
            row[j] = previous_diagonal + 1 if x == y else max(row[j], row[j - 1])
            previous_diagonal = current
    return row[-1]


@settings(max_examples=500, deadline=None)
@given(a=st.lists(st.sampled_from("abcd"), max_size=30), b=st.lists(st.sampled_from("abcd"), max_size=30))
def test_line_changes_keep_a_longest_common_subsequence(a: list[str], b: list[str]) -> None:
    lines_a = [line.encode() + b"\n" for line in a]
    lines_b = [line.encode() + b"\n" for line in b]

    changed_a, changed_b = line_changes(lines_a, lines_b, Budget("diff", ReaderLimits(), timeout_ms=10_000))

    kept_a = [line for line, changed in zip(lines_a, changed_a, strict=True) if not changed]
    kept_b = [line for line, changed in zip(lines_b, changed_b, strict=True) if not changed]
    assert kept_a == kept_b
    assert len(kept_a) == longest_common_subsequence(a, b)


def test_over_the_cost_bound_the_middle_is_replaced_but_still_consistent() -> None:
    a = [b"%d\n" % (i % 7) for i in range(300)]
    b = list(reversed(a))

    changed_a, changed_b = line_changes(
        a, b, Budget("diff", ReaderLimits(max_diff_cost=50), timeout_ms=10_000)
    )

    kept_a = [line for line, changed in zip(a, changed_a, strict=True) if not changed]
    kept_b = [line for line, changed in zip(b, changed_b, strict=True) if not changed]
    assert kept_a == kept_b
