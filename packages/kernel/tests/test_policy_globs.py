"""Globs, path scope and compiled rules (kernel.md §5.1, exit-gate.md §2.5)."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_kernel.policy import (
    CompiledGlob,
    InvalidPolicyInputError,
    PermissionMap,
    compile_glob,
    compile_rules,
    decide,
    path_allowed,
    translate,
)
from harness_kernel.policy._glob import check_changed_paths, match_glob

PROPERTIES = settings(max_examples=150, deadline=None, database=None)

# Characters that matter to globs, to regexes, or to both.
GLOB_ALPHABET = "ab/*?.[]()+^$|\\{}\n"
SUBJECT_ALPHABET = "ab/.*?[]()+^$|\\\n"

patterns = st.text(alphabet=GLOB_ALPHABET, max_size=10)
subjects = st.text(alphabet=SUBJECT_ALPHABET, max_size=12)
effects = st.sampled_from(["allow", "ask", "deny"])
subject_maps = st.dictionaries(st.one_of(patterns, st.just("*")), effects, max_size=5)
permission_maps = st.dictionaries(
    st.sampled_from(["fs.read", "process.exec", "tool.call"]), st.one_of(effects, subject_maps), max_size=3
)


def loose(value: object) -> Any:
    """Hand a deliberately ill-typed value to the API under test."""
    return value


def glob_tokens(pattern: str) -> list[str]:
    """The dialect's tokens, written independently: ``**`` (with the "/" it swallows), ``*``, ``?``, chars."""
    tokens: list[str] = []
    index = 0
    while index < len(pattern):
        if pattern.startswith("**", index):
            tokens.append("**")
            index += 2
            if pattern.startswith("/", index):
                index += 1
        else:
            tokens.append(pattern[index])
            index += 1
    return tokens


def reference_match(pattern: str, value: str) -> bool:
    """An independent matcher for the glob dialect: tokens, then dynamic programming."""
    tokens = glob_tokens(pattern)

    @cache
    def matches(token: int, position: int) -> bool:
        if token == len(tokens):
            return position == len(value)
        kind = tokens[token]
        if kind == "**":
            return any(matches(token + 1, end) for end in range(position, len(value) + 1))
        if kind == "*":
            end = position
            while True:
                if matches(token + 1, end):
                    return True
                if end == len(value) or value[end] == "/":
                    return False
                end += 1
        if position == len(value):
            return False
        if kind == "?":
            return value[position] != "/" and matches(token + 1, position + 1)
        return value[position] == kind and matches(token + 1, position + 1)

    return matches(0, 0)


# ------------------------------------------------------------------ properties


@PROPERTIES
@given(pattern=patterns, value=subjects)
def test_a_compiled_glob_agrees_with_match_glob_and_with_a_reference_matcher(
    pattern: str, value: str
) -> None:
    compiled = compile_glob(pattern)

    assert compiled.test(value) == match_glob(pattern, value) == reference_match(pattern, value)
    assert (compiled.pattern, compiled.source) == (pattern, translate(pattern))


# The old implementation, kept as an oracle: the regex translation run by ``re``. It
# backtracks, so the property keeps patterns and subjects short enough for it to be fast.
ORACLE_PATTERN_ALPHABET = "ab/-.\n*?"
ORACLE_SUBJECT_ALPHABET = "ab/-.\n*?"
oracle_patterns = st.one_of(
    st.text(alphabet=ORACLE_PATTERN_ALPHABET, max_size=10),
    # Star-heavy globs built from the pieces that make backtracking expensive.
    st.lists(st.sampled_from(["**", "*", "?", "/", "**/", "a", "-", ".", "\n", "b"]), max_size=8).map(
        "".join
    ),
)
oracle_subjects = st.text(alphabet=ORACLE_SUBJECT_ALPHABET, max_size=16)


def regex_oracle(pattern: str, value: str) -> bool:
    return re.fullmatch(translate(pattern), value, re.DOTALL) is not None


@pytest.mark.slow
@settings(max_examples=1500, deadline=None, database=None)
@given(pattern=oracle_patterns, value=oracle_subjects)
def test_the_linear_matcher_agrees_with_the_old_regex_translation(pattern: str, value: str) -> None:
    expected = regex_oracle(pattern, value)

    assert match_glob(pattern, value) is expected
    assert compile_glob(pattern).test(value) is expected


@PROPERTIES
@given(pattern=oracle_patterns, data=st.data())
def test_a_subject_built_from_the_globs_tokens_is_matched(pattern: str, data: st.DataObject) -> None:
    # Random subjects rarely match; this one is made to, by filling every wildcard with text
    # it accepts (``**`` anything, ``*`` anything without "/", ``?`` one non-"/" character).
    pieces: list[str] = []
    for token in glob_tokens(pattern):
        if token == "**":
            pieces.append(data.draw(oracle_subjects))
        elif token == "*":
            pieces.append(data.draw(oracle_subjects).replace("/", ""))
        elif token == "?":
            pieces.append(data.draw(st.sampled_from("ab-.\n*?")))
        else:
            pieces.append(token)
    subject = "".join(pieces)

    assert match_glob(pattern, subject)
    assert compile_glob(pattern).test(subject)
    assert regex_oracle(pattern, subject)


@PROPERTIES
@given(pattern=patterns)
def test_a_pattern_without_wildcards_matches_exactly_itself(pattern: str) -> None:
    literal = pattern.replace("*", "").replace("?", "")

    assert match_glob(literal, literal)
    assert not match_glob(literal, literal + "a")


@PROPERTIES
@given(
    permissions=permission_maps,
    action=st.sampled_from(["fs.read", "process.exec", "tool.call", "network"]),
    subject=st.one_of(st.none(), subjects),
)
def test_compiled_rules_decide_exactly_like_decide(
    permissions: PermissionMap, action: str, subject: str | None
) -> None:
    compiled = compile_rules(permissions)

    assert compiled.decide(action, subject) == decide(permissions, action, subject)
    assert compiled.actions() == tuple(permissions)


# ------------------------------------------------------------------ hand cases


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("a/**/b", "a/b", True),
        ("a/**/b", "a/x/b", True),
        ("a/**/b", "a/x/y/b", True),
        # The swallowed slash is gone: "a/**/b" reads as "a/" + any run + "b".
        ("a/**/b", "a/xb", True),
        ("**/x.py", "x.py", True),
        ("**/x.py", "deep/down/x.py", True),
        ("a/**", "a/", True),
        ("a/**", "a/b/c", True),
        ("a/**", "a", False),
        # Only one slash is swallowed.
        ("a/**//b", "a//b", True),
        ("a/**//b", "a/b", False),
        ("a**", "a\nb/c", True),
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/a/b.py", False),
        ("*", "", True),
        ("*", "a/b", False),
        ("a?b", "axb", True),
        ("a?b", "a/b", False),
        ("a?b", "ab", False),
        ("a.b", "axb", False),
        ("a.b", "a.b", True),
        ("(x)+[y]{2}^$|\\", "(x)+[y]{2}^$|\\", True),
        ("[ab]", "a", False),
        ("a+", "aa", False),
        ("abc", "abcd", False),
        ("abc", "xabc", False),
        ("abc", "abc\n", False),
        ("", "", True),
        ("", "a", False),
        # Runs of stars, and "**" next to "/" on either side.
        ("***", "a/b", True),
        ("**/**", "", True),
        ("a/**/**/b", "a/b", True),
        ("a/**/", "a/", True),
        ("*/**", "a", False),
        ("*/**", "a/", True),
        ("**a", "x/ya", True),
        ("*a", "x/ya", False),
        # Newlines are ordinary characters for every wildcard; "/" is the only special one.
        ("?", "\n", True),
        ("*", "a\nb", True),
        ("a*b", "a\n/b", False),
        ("a?", "a/", False),
        ("a*-*-*.yaml", "ab-c-d-e.yaml", True),
        ("*a*a*a*a*a*b", "aaaaab", True),
        ("*a*a*a*a*a*b", "aaaab", False),
    ],
)
def test_glob_hand_cases(pattern: str, value: str, expected: bool) -> None:
    assert match_glob(pattern, value) is expected
    assert compile_glob(pattern).test(value) is expected


WORST_CASES = [
    # (pattern, a subject the old regex needed minutes to hours for, the answer). Some end
    # with the glob's literal suffix, so the whole subject goes through the automaton.
    ("**/*-*-*.yaml", "-" * 1200, False),
    ("**/*-*-*.yaml", "a-" * 600, False),
    ("**/*-*-*.yaml", "-" * 4090 + "/.yaml", False),
    ("**/*-*-*.yaml", "-" * 4091 + ".yaml", True),
    ("**/*-*-*.yaml", "x/" * 100 + "-" * 1000 + "/" + "a-b-c.yaml", True),
    ("*a*a*a*a*a*b", "a" * 1200, False),
    ("*a*a*a*a*a*b", "a" * 1198 + "/b", False),
    ("*a*a*a*a*a*b", "a" * 4094 + "/b", False),
    ("*a*a*a*a*a*b", "a" * 4095 + "b", True),
    ("**/**/**/**/x", "a/" * 600, False),
    ("**/**/**/**/x", "a/" * 2048, False),
    ("**/**/**/**/x", "a/" * 2047 + "x", True),
    ("*?*?*?*?*?/x", "ab" * 2045 + "/y/x", False),
]


@pytest.mark.parametrize(("pattern", "value", "expected"), WORST_CASES)
def test_worst_case_globs_against_long_subjects_complete_with_the_right_answer(
    pattern: str, value: str, expected: bool
) -> None:
    # Before the linear matcher, "**/*-*-*.yaml" against the 1,200-character subject
    # blocked the event loop for 33.6 s; this test used to hang. Time goes in
    # benchmarks/glob_match.py; here only the answer is checked.
    assert match_glob(pattern, value) is expected
    assert compile_glob(pattern).test(value) is expected


def test_matching_never_runs_a_regular_expression(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a glob was matched with the re module")

    compiled = compile_glob("**/*-*-*.yaml")
    for name in ("compile", "fullmatch", "match", "search"):
        monkeypatch.setattr(re, name, refuse)

    assert compiled.test("a/b-c-d.yaml")
    assert match_glob("src/*.py", "src/a.py")
    assert (
        compile_rules({"fs.read": {"secrets/**": "deny", "*": "allow"}})
        .decide("fs.read", "secrets/key")
        .effect
        == "deny"
    )


def test_translate_gives_a_self_contained_regex_source() -> None:
    assert translate("a/**/b*?.") == r"(?s:a/.*b[^/]*[^/]\.)"
    assert re.fullmatch(translate("a/**"), "a/x\ny") is not None


def test_a_compiled_glob_is_a_frozen_record() -> None:
    compiled = compile_glob("src/*.py")

    assert isinstance(compiled, CompiledGlob)
    with pytest.raises(AttributeError):
        loose(compiled).pattern = "other"


def test_the_documented_pytest_star_rule_admits_a_path_argument_of_a_command() -> None:
    # Decision 041 changed this test: process.exec patterns are command globs, where "*"
    # crosses "/". Before, the path argument fell through to the "*": deny fallback.
    permissions: PermissionMap = {"process.exec": {"uv run --frozen pytest*": "allow", "*": "deny"}}

    with_path = decide(permissions, "process.exec", "uv run --frozen pytest packages/kernel/tests")
    without_path = decide(permissions, "process.exec", "uv run --frozen pytest -q")

    matched = ("allow", 'subject matched pattern "uv run --frozen pytest*"')
    assert (with_path.effect, with_path.reason) == matched
    assert (without_path.effect, without_path.reason) == matched


# ------------------------------------------------------------------ path scope


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("packages/events/x.py", True),
        ("packages/events/deep/x.py", True),
        ("packages/events-2/x", False),
        ("packages/events", False),
        ("packages/kernel/src/a.py", True),
        ("packages/kernel", False),
        ("README.md", True),
        ("docs/README.md", False),
        ("tasks/a.yaml", True),
        ("tasks/sub/a.yaml", False),
    ],
)
def test_path_allowed_by_glob_or_by_folder_prefix(path: str, expected: bool) -> None:
    allowed = ["packages/events/", "packages/kernel/**", "README.md", "tasks/*.yaml"]

    assert path_allowed(allowed, path) is expected
    assert path_allowed(tuple(allowed), path) is expected


def test_a_folder_prefix_is_literal_not_a_glob() -> None:
    assert not path_allowed(["pack*/"], "packages/x")
    assert path_allowed(["pack*/"], "pack*/x")


def test_check_changed_paths_reports_violations_in_input_order() -> None:
    allowed = ["packages/kernel/**", "uv.lock"]

    ok, violations = check_changed_paths(
        allowed, ["z.txt", "uv.lock", "packages/kernel/a.py", "a.txt", "z.txt"]
    )

    assert ok is False
    assert violations == ("z.txt", "a.txt", "z.txt")
    assert check_changed_paths(allowed, ["uv.lock"]) == (True, ())
    assert check_changed_paths(allowed, []) == (True, ())


@pytest.mark.parametrize(
    "call",
    [
        lambda: translate(loose(None)),
        lambda: match_glob(loose(1), "a"),
        lambda: match_glob("a", loose(b"a")),
        lambda: compile_glob("a").test(loose(None)),
        lambda: path_allowed(loose("packages/**"), "a"),
        lambda: path_allowed(["a", loose(1)], "a"),
        lambda: path_allowed(["a"], loose(None)),
        lambda: check_changed_paths(["a"], loose("a")),
        lambda: check_changed_paths(["a"], ["a", loose(None)]),
    ],
)
def test_non_string_globs_and_paths_raise_a_typed_error(call: Any) -> None:
    with pytest.raises(InvalidPolicyInputError) as caught:
        call()
    assert caught.value.code == "POLICY_INVALID_INPUT"
