"""The manifest knows the development tools' five actions (issue #18, decision 041)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from exit_gate_manifest_examples import PROPERTIES, base, issues_of
from hypothesis import given
from hypothesis import strategies as st

from harness_exit_gate.manifest import decode_task_manifest, load_task_manifest, manifest_permissions
from harness_kernel.policy import decide

REPOSITORY = Path(__file__).resolve().parents[3]
FILE_ACTIONS = ("fs.read", "fs.list", "fs.write")


def with_permissions(permissions: dict[str, Any]) -> dict[str, Any]:
    document = base()
    document["permissions"] = permissions
    return document


def test_every_action_of_the_development_tools_can_be_named() -> None:
    manifest = decode_task_manifest(
        with_permissions(
            {
                "fs.read": {"src/**": "allow", "*": "deny"},
                "fs.list": {".": "allow", "src/**": "allow", "*": "deny"},
                "fs.write": {"src/*.py": "ask", "*": "deny"},
                "process.exec": {"uv run pytest*": "allow", "*": "deny"},
                "git.diff": "allow",
            }
        )
    )
    permissions = manifest_permissions(manifest)

    assert decide(permissions, "fs.read", "src/a/b.py").effect == "allow"
    assert decide(permissions, "fs.write", "src/a/b.py").effect == "deny"
    assert decide(permissions, "fs.write", "src/b.py").effect == "ask"
    assert decide(permissions, "process.exec", "uv run pytest tests/test_a.py").effect == "allow"
    assert decide(permissions, "git.diff").effect == "allow"


@pytest.mark.parametrize("effect", ["allow", "ask", "deny"])
def test_git_diff_takes_a_flat_effect(effect: str) -> None:
    assert decode_task_manifest(with_permissions({"git.diff": effect})).permissions["git.diff"] == effect


def test_a_subject_map_for_git_diff_is_refused() -> None:
    issues = issues_of(with_permissions({"git.diff": {"*": "allow"}}))

    assert issues == [("permissions.git.diff", "git.diff takes no subject; use allow, ask or deny")]


@pytest.mark.parametrize("action", FILE_ACTIONS)
@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("/etc/passwd", "must be a workspace-relative path (no leading /)"),
        ("/**", "must be a workspace-relative path (no leading /)"),
        ("../secrets/*", "must not contain a .. segment"),
        ("src/../../x", "must not contain a .. segment"),
        ("src/..", "must not contain a .. segment"),
    ],
)
def test_a_file_action_refuses_an_absolute_or_parent_pattern(action: str, pattern: str, message: str) -> None:
    issues = issues_of(with_permissions({action: {pattern: "allow", "*": "deny"}}))

    assert issues == [(f"permissions.{action}", f'{action} pattern "{pattern}" {message}')]


def test_every_bad_file_pattern_is_reported_at_once() -> None:
    issues = issues_of(
        with_permissions(
            {"fs.read": {"/a": "allow"}, "fs.write": {"../b": "deny"}, "git.diff": {"x": "allow"}}
        )
    )

    assert [path for path, _ in issues] == [
        "permissions.fs.read",
        "permissions.fs.write",
        "permissions.git.diff",
    ]


@pytest.mark.parametrize("pattern", ["/usr/bin/env*", "cat ../x", "git diff a/../b*"])
def test_process_exec_patterns_are_command_globs_so_slashes_and_dots_are_fine(pattern: str) -> None:
    manifest = decode_task_manifest(with_permissions({"process.exec": {pattern: "allow", "*": "deny"}}))

    assert pattern in manifest.permissions["process.exec"]


def test_the_same_patterns_stay_valid_for_actions_the_manifest_does_not_know() -> None:
    # Only the five actions gained rules; an unknown action keeps the old, open grammar.
    manifest = decode_task_manifest(with_permissions({"network.fetch": {"/x/../y": "deny"}}))

    assert "network.fetch" in manifest.permissions


relative_segments = st.text(alphabet="abc.*?-_", min_size=1, max_size=6).filter(lambda s: s != "..")


@PROPERTIES
@given(
    action=st.sampled_from(FILE_ACTIONS),
    segments=st.lists(relative_segments, min_size=1, max_size=4),
    absolute=st.booleans(),
    parent_at=st.one_of(st.none(), st.integers(min_value=0, max_value=4)),
)
def test_a_file_pattern_is_valid_exactly_when_relative_and_without_parent_segments(
    action: str, segments: list[str], absolute: bool, parent_at: int | None
) -> None:
    if parent_at is not None:
        segments.insert(min(parent_at, len(segments)), "..")
    pattern = ("/" if absolute else "") + "/".join(segments)
    document = with_permissions({action: {pattern: "allow", "*": "deny"}})

    if absolute or parent_at is not None:
        assert [path for path, _ in issues_of(document)] == [f"permissions.{action}"]
    else:
        assert pattern in decode_task_manifest(document).permissions[action]


@pytest.mark.parametrize("name", sorted(path.name for path in (REPOSITORY / "tasks").glob("*.yaml")))
def test_every_manifest_in_tasks_is_still_valid(name: str) -> None:
    manifest = load_task_manifest((REPOSITORY / "tasks" / name).read_text(encoding="utf-8"))

    assert f"{manifest.id}.yaml" == name
