"""The ``.gitignore`` matcher: git's semantics, in time linear in the path.

The reference is a direct, backtracking reading of git's wildmatch rules, fine on the tiny
inputs hypothesis draws; the matcher under test must agree with it everywhere. Real git is
the reference for whole work trees.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from workspace_git_repositories import commit_all, init, reference_tree, workspace_diff, workspace_snapshot

from harness_workspace.local._git.ignore import IgnoreRules, parse_ignore_file

ASCII = [chr(code) for code in range(128)]
CLASSES: dict[str, set[str]] = {
    "alpha": {c for c in ASCII if c.isalpha()},
    "digit": {c for c in ASCII if c.isdigit()},
    "alnum": {c for c in ASCII if c.isalnum()},
    "lower": {c for c in ASCII if c.islower()},
    "upper": {c for c in ASCII if c.isupper()},
    "space": set(" \t\n\r"),
    "blank": set(" \t"),
    "xdigit": set("0123456789abcdefABCDEF"),
}
NEVER = (frozenset[str](), False, -1)


def reference_match(pattern: str, text: str) -> bool:
    """git's wildmatch with WM_PATHNAME, read literally (backtracking; tests only)."""

    @functools.cache
    def match(p: int, t: int) -> bool:
        if p == len(pattern):
            return t == len(text)
        c = pattern[p]
        if c == "*":
            end = p
            while end < len(pattern) and pattern[end] == "*":
                end += 1
            special = (
                end - p >= 2
                and (p == 0 or pattern[p - 1] == "/")
                and (end == len(pattern) or pattern[end] == "/" or pattern[end : end + 2] == "\\/")
            )
            if special and end < len(pattern) and pattern[end] == "/" and match(end + 1, t):
                return True
            for stop in range(t, len(text) + 1):
                if match(end, stop):
                    return True
                if stop < len(text) and text[stop] == "/" and not special:
                    return False
            return False
        if t == len(text):
            return False
        if c == "?":
            return text[t] != "/" and match(p + 1, t + 1)
        if c == "[":
            members, negated, after = parse_class(pattern, p + 1)
            if after < 0:
                return False
            return text[t] != "/" and (text[t] in members) != negated and match(after, t + 1)
        if c == "\\":
            if p + 1 == len(pattern):
                return False
            return text[t] == pattern[p + 1] and match(p + 2, t + 1)
        return text[t] == c and match(p + 1, t + 1)

    return match(0, 0)


def parse_class(pattern: str, p: int) -> tuple[frozenset[str], bool, int]:
    """Parse a ``[...]`` class after its ``[``: its members, whether negated, the position after it."""
    negated = p < len(pattern) and pattern[p] in "!^"
    if negated:
        p += 1
    members: set[str] = set()
    previous: str | None = None
    first = True
    while True:
        if p >= len(pattern):
            return NEVER
        c = pattern[p]
        if c == "]" and not first:
            return frozenset(members), negated, p + 1
        first = False
        if c == "\\":
            if p + 1 >= len(pattern):
                return NEVER
            previous = pattern[p + 1]
            members.add(previous)
            p += 2
        elif c == "-" and previous is not None and p + 1 < len(pattern) and pattern[p + 1] != "]":
            high = pattern[p + 1]
            p += 2
            if high == "\\":
                if p >= len(pattern):
                    return NEVER
                high = pattern[p]
                p += 1
            members.update(chr(code) for code in range(ord(previous), ord(high) + 1))
            previous = None
        elif c == "[" and pattern[p + 1 : p + 2] == ":":
            end = pattern.find("]", p + 2)
            if end < 0:
                return NEVER
            if end - (p + 2) - 1 < 0 or pattern[end - 1] != ":":
                members.add("[")
                previous = "["
                p += 1
            else:
                name = pattern[p + 2 : end - 1]
                if name not in CLASSES:
                    return NEVER
                members.update(CLASSES[name])
                previous = None
                p = end + 1
        else:
            members.add(c)
            previous = c
            p += 1


def matcher(pattern: str) -> object:
    (compiled,) = parse_ignore_file(pattern.encode() + b"\n")
    return compiled


PATTERN_ALPHABET = st.sampled_from(
    ["a", "b", "/", "*", "**", "?", "[", "]", "!", "^", "-", "\\", "[:alpha:]", "."]
)
PATH_ALPHABET = st.sampled_from(["a", "b", "/", ".", "-", "]", "!", "*"])


@pytest.mark.slow
@settings(max_examples=1500, deadline=None)
@given(
    pattern=st.lists(PATTERN_ALPHABET, min_size=1, max_size=8).map("".join),
    path=st.lists(PATH_ALPHABET, max_size=10).map("".join),
)
def test_compiled_patterns_agree_with_gits_wildmatch(pattern: str, path: str) -> None:
    lines = parse_ignore_file(pattern.encode() + b"\n")
    if not lines or not path or path.startswith("/") or path.endswith("/") or "//" in path:
        return
    (compiled,) = lines
    body = pattern
    if body.startswith("!"):
        body = body[1:]
    if body.endswith("/") and not body.endswith("\\/"):
        body = body[:-1]
    text = path if compiled.anchored else path.rsplit("/", 1)[-1]
    if compiled.anchored and body.startswith("/"):
        body = body[1:]
    trimmed = body.rstrip(" ")
    assert compiled.matches(text.encode()) == reference_match(trimmed, text), (pattern, path)


@pytest.mark.parametrize(
    ("lines", "path", "directory", "ignored"),
    [
        ("*.log", "a/b/x.log", False, True),
        ("*.log\n!keep.log", "keep.log", False, False),
        ("/root-only", "sub/root-only", False, False),
        ("/root-only", "root-only", False, True),
        ("build/", "build", False, False),
        ("build/", "build", True, True),
        ("doc/*.txt", "doc/a.txt", False, True),
        ("doc/*.txt", "doc/x/a.txt", False, False),
        ("doc/**/*.txt", "doc/x/y/a.txt", False, True),
        ("doc/**/*.txt", "doc/a.txt", False, True),
        ("**/foo", "a/b/foo", False, True),
        ("abc/**", "abc/x/y", False, True),
        ("abc/**", "abc", True, False),
        ("a/**b", "a/x/b", False, False),
        ("\\#hash", "#hash", False, True),
        ("#comment", "#comment", False, False),
        ("\\!bang", "!bang", False, True),
        ("trailing\\ ", "trailing ", False, True),
        ("trailing   ", "trailing", False, True),
        ("[a-c]x", "bx", False, True),
        ("[!a-c]x", "bx", False, False),
        ("[]]x", "]x", False, True),
        ("[unclosed", "[unclosed", False, False),
        ("x[[:digit:]]", "x7", False, True),
        ("x[[:nope:]]", "x7", False, False),
        ("crlf\r", "crlf", False, True),
    ],
)
def test_gitignore_examples(lines: str, path: str, directory: bool, ignored: bool) -> None:
    rules = IgnoreRules([])
    rules.push(b"", parse_ignore_file(lines.encode() + b"\n"))

    assert rules.excluded(path.encode(), directory=directory) is ignored


def test_deeper_files_win_and_info_exclude_comes_last() -> None:
    rules = IgnoreRules(parse_ignore_file(b"*.txt\n!kept.md\n"))
    rules.push(b"", parse_ignore_file(b"*.md\n"))

    assert rules.excluded(b"x.txt", directory=False)
    assert rules.excluded(b"kept.md", directory=False)  # the root .gitignore outranks info/exclude

    rules.push(b"sub/", parse_ignore_file(b"!*.md\n"))  # entering sub/
    assert not rules.excluded(b"sub/kept.md", directory=False)
    assert rules.excluded(b"sub/x.txt", directory=False)


async def test_pathological_patterns_against_long_names_finish(tmp_path: Path) -> None:
    root = init(tmp_path / "repo")
    patterns = "".join(f"**/a*b*c*d*e*f*g*h*{i}\n" for i in range(60))
    (root / ".gitignore").write_text(patterns + "[[:alpha:]" + "*a" * 200 + "\n")
    for index in range(60):
        (root / f"{'a' * 200}{index}").write_text("x\n")
    commit_all(root)
    (root / ("a" * 200)).write_text("new\n")

    diff = await workspace_diff(root)

    assert f"b/{'a' * 200}\n" in diff


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    patterns=st.lists(
        st.lists(PATTERN_ALPHABET.filter(lambda part: part not in ("\\",)), min_size=1, max_size=6).map(
            "".join
        ),
        max_size=6,
    ),
    files=st.lists(
        st.lists(st.sampled_from(["a", "b", "ab", ".x", "!"]), min_size=1, max_size=3).map("/".join),
        min_size=1,
        max_size=8,
        unique=True,
    ),
)
def test_work_trees_with_random_ignore_files_match_real_git(
    tmp_path_factory: pytest.TempPathFactory, patterns: list[str], files: list[str]
) -> None:
    base = tmp_path_factory.mktemp("ignore")
    root = init(base / "repo")
    for name in sorted(files):
        path = root / name
        if any(parent.is_file() for parent in path.parents if parent != root and root in parent.parents):
            continue
        if path.is_dir():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name + "\n")
    (root / ".gitignore").write_text("\n".join(patterns) + "\n")

    snapshot = trio.run(workspace_snapshot, root)

    assert snapshot.id == f"git-tree-{reference_tree(root, base / 'reference')}"
