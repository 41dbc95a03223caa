"""Command globs (decision 041): ``process.exec`` patterns read a command line, not a path."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_kernel.policy import (
    InvalidPolicyInputError,
    PermissionMap,
    compile_glob,
    compile_rules,
    decide,
    translate,
)
from harness_kernel.policy._glob import GLOB_SYNTAXES, match_glob
from harness_kernel.policy._rules import COMMAND_ACTIONS, glob_syntax_for

PROPERTIES = settings(max_examples=300, deadline=None, database=None)

GLOB_ALPHABET = "ab /-*?.[]()+^$|\\{}\n"
SUBJECT_ALPHABET = "ab /-.*?[]()+^$|\\\n"

patterns = st.text(alphabet=GLOB_ALPHABET, max_size=10)
subjects = st.text(alphabet=SUBJECT_ALPHABET, max_size=14)


def loose(value: object) -> Any:
    """Hand a deliberately ill-typed value to the API under test."""
    return value


def reference_regex(pattern: str) -> str:
    """The command dialect written as a regex, independently: ``*`` any run, ``?`` any one."""
    parts = [".*" if char == "*" else "." if char == "?" else re.escape(char) for char in pattern]
    return "".join(parts)


def reference_match(pattern: str, value: str) -> bool:
    """A second reference: dynamic programming over the pattern's characters."""

    @cache
    def matches(index: int, position: int) -> bool:
        if index == len(pattern):
            return position == len(value)
        char = pattern[index]
        if char == "*":
            return any(matches(index + 1, end) for end in range(position, len(value) + 1))
        if position == len(value):
            return False
        return (char == "?" or value[position] == char) and matches(index + 1, position + 1)

    return matches(0, 0)


@PROPERTIES
@given(pattern=patterns, value=subjects)
def test_the_command_matcher_agrees_with_two_independent_references(pattern: str, value: str) -> None:
    expected = re.fullmatch(reference_regex(pattern), value, re.DOTALL) is not None

    assert reference_match(pattern, value) is expected
    assert match_glob(pattern, value, syntax="command") is expected
    assert compile_glob(pattern, syntax="command").test(value) is expected


@PROPERTIES
@given(pattern=patterns, data=st.data())
def test_a_subject_built_from_the_command_globs_own_characters_is_matched(
    pattern: str, data: st.DataObject
) -> None:
    pieces: list[str] = []
    for char in pattern:
        if char == "*":
            pieces.append(data.draw(st.text(alphabet=SUBJECT_ALPHABET, max_size=4)))
        elif char == "?":
            pieces.append(data.draw(st.sampled_from(SUBJECT_ALPHABET)))
        else:
            pieces.append(char)

    assert match_glob(pattern, "".join(pieces), syntax="command")


@PROPERTIES
@given(pattern=patterns, value=subjects)
def test_the_translated_command_regex_means_what_the_matcher_does(pattern: str, value: str) -> None:
    source = translate(pattern, syntax="command")

    assert compile_glob(pattern, syntax="command").source == source
    assert (re.fullmatch(source, value) is not None) is match_glob(pattern, value, syntax="command")


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("uv run pytest*", "uv run pytest tests/test_a.py", True),
        ("uv run pytest*", "uv run pytest", True),
        ("uv run pytest*", "uv run pyright", False),
        ("git diff*", "git diff a/b", True),
        ("git diff*", "git diff -- 'a b/c'", True),
        ("python3 -m pytest*", "python3 -m pytest -q", True),
        ("*/bin/sh*", "/usr/bin/sh -c x", True),
        ("rm ?", "rm /", True),
        ("rm ?", "rm //", False),
        ("a**b", "a/x/b", True),
        ("a**/b", "ab", False),  # no "/" is swallowed in a command glob
        ("git diff*", "git status", False),
    ],
)
def test_command_glob_hand_cases(pattern: str, value: str, expected: bool) -> None:
    assert match_glob(pattern, value, syntax="command") is expected


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("*a*a*a*a*a*b", "a/" * 2047 + "a", False),
        ("*a*a*a*a*a*b", "a/" * 2047 + "b", True),
        ("*?*?*?*?*?/x", "ab" * 2045 + "/y/q", False),
        ("*-*-*.yaml", "-" * 4096, False),
        ("*-*-*.yaml", "-" * 4091 + ".yaml", True),
    ],
)
def test_worst_case_command_globs_against_long_subjects_complete_with_the_right_answer(
    pattern: str, value: str, expected: bool
) -> None:
    # The same linear matcher as for paths (decision 004); time goes in the benchmark.
    assert match_glob(pattern, value, syntax="command") is expected


def test_command_matching_never_runs_a_regular_expression(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a glob was matched with the re module")

    compiled = compile_glob("uv run *pytest* -q?", syntax="command")
    for name in ("compile", "fullmatch", "match", "search"):
        monkeypatch.setattr(re, name, refuse)

    assert compiled.test("uv run --frozen pytest a/b -q/")
    assert decide({"process.exec": {"git diff*": "allow"}}, "process.exec", "git diff a/b").effect == "allow"


def test_only_process_exec_reads_its_patterns_as_command_globs() -> None:
    assert COMMAND_ACTIONS == ("process.exec",)
    assert GLOB_SYNTAXES == ("path", "command")
    assert glob_syntax_for("process.exec") == "command"
    for action in ("fs.read", "fs.list", "fs.write", "git.diff", "tool.call", "process.exec2"):
        assert glob_syntax_for(action) == "path"


@pytest.mark.parametrize("action", ["fs.read", "fs.list", "fs.write"])
def test_file_actions_keep_path_semantics_for_star(action: str) -> None:
    permissions: PermissionMap = {action: {"src/*": "allow", "*": "deny"}}

    assert decide(permissions, action, "src/a.py").effect == "allow"
    # "*" does not cross "/" in a path glob: a file below src/sub/ falls to the fallback.
    deeper = decide(permissions, action, "src/sub/a.py")
    assert (deeper.effect, deeper.reason) == ("deny", 'no pattern matched; fallback "*"')
    assert compile_rules(permissions).decide(action, "src/sub/a.py").effect == "deny"


def test_process_exec_decisions_cross_slashes_in_decide_and_compiled_rules() -> None:
    permissions: PermissionMap = {
        "process.exec": {"git diff*": "allow", "git diff --output*": "deny", "*": "deny"}
    }

    compiled = compile_rules(permissions)
    for subject, effect in [
        ("git diff a/b", "allow"),
        ("git diff --output=/tmp/x", "deny"),
        ("git status", "deny"),
    ]:
        assert decide(permissions, "process.exec", subject).effect == effect
        assert compiled.decide("process.exec", subject).effect == effect


@pytest.mark.parametrize("syntax", ["", "Path", "regex", None, 1])
def test_an_unknown_glob_syntax_is_a_typed_error(syntax: object) -> None:
    for call in (
        lambda: match_glob("a*", "ab", syntax=loose(syntax)),
        lambda: compile_glob("a*", syntax=loose(syntax)),
        lambda: translate("a*", syntax=loose(syntax)),
    ):
        with pytest.raises(InvalidPolicyInputError) as caught:
            call()
        assert caught.value.code == "POLICY_INVALID_INPUT"
