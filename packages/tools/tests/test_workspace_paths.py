"""The canonical model-facing workspace path grammar (``check_workspace_path``)."""

from __future__ import annotations

import pickle
import posixpath
import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_tools import (
    TOOL_WORKSPACE_PATH_INVALID,
    WORKSPACE_PATH_MAX_CHARS,
    WORKSPACE_ROOT_PATH,
    WORKSPACE_SEGMENT_MAX_BYTES,
    InvalidWorkspacePathError,
    ToolError,
    check_workspace_path,
)

PROPERTIES = settings(max_examples=500, deadline=None, database=None)

# Pieces that matter to the grammar: dot segments, separators of both kinds, a decomposed
# accent, control and format characters, spaces, and plain names.
PIECES = ["a", "b.txt", "src", ".", "..", "", "\\", "é", "e\u0301", "\x00", "\u202e", " ", "\n", "..."]
joined_paths = st.lists(st.sampled_from(PIECES), max_size=6).map("/".join)
absolute_paths = joined_paths.map(lambda path: "/" + path)
any_paths = st.one_of(
    joined_paths, absolute_paths, st.text(max_size=40), st.text(alphabet="a/.\\", max_size=12)
)
canonical_segments = st.text(
    alphabet=st.characters(categories=["L", "N", "P", "S"], exclude_characters="/\\"), min_size=1, max_size=12
).filter(lambda segment: segment not in (".", ".."))


def loose(value: object) -> Any:
    """Hand a deliberately ill-typed value to the function under test."""
    return value


def refusal(path: str, *, allow_root: bool = False) -> InvalidWorkspacePathError:
    with pytest.raises(InvalidWorkspacePathError) as caught:
        check_workspace_path(path, allow_root=allow_root)
    return caught.value


# ------------------------------------------------------------------ pinned cases


@pytest.mark.parametrize(
    "path",
    [
        "a",
        "src/app.py",
        "secrets/key",
        ".env",
        "...",
        "..a/b..",
        "a b/c d.txt",
        " leading and trailing ",
        "README.MD",
        "caf\u00e9/men\u00fc.txt",
        "~/not-a-home",
        "a" * WORKSPACE_SEGMENT_MAX_BYTES,
        "\u00e9" * (WORKSPACE_SEGMENT_MAX_BYTES // 2),
        "/".join(["a" * 100] * 40)[:WORKSPACE_PATH_MAX_CHARS].rstrip("/"),
    ],
)
def test_canonical_paths_are_returned_unchanged(path: str) -> None:
    assert check_workspace_path(path) is path


@pytest.mark.parametrize(
    ("path", "suggestion"),
    [
        ("./src/a.py", "src/a.py"),
        ("./secrets/key", "secrets/key"),
        ("src/./a.py", "src/a.py"),
        ("secrets//key", "secrets/key"),
        ("secrets/key/", "secrets/key"),
        ("secrets\\key", "secrets/key"),
        ("src\\a.py/", "src/a.py"),
        ("cafe\u0301/x", "caf\u00e9/x"),
        ("x/../secrets/key", None),
        ("src/../secrets/key", None),
        ("..", None),
        ("../outside", None),
        ("src\\..\\secrets\\key", None),
        ("/etc/passwd", None),
        ("/", None),
        ("\\\\server\\share", None),
        ("", None),
        ("./", None),
        (".", None),
        ("a\x00b", None),
        ("a\nb", None),
        ("a\u202eb", None),
        ("a\ud800b", None),
        ("a\u00a0b", None),
        ("a\u2028b", None),
        ("x" * (WORKSPACE_SEGMENT_MAX_BYTES + 1), None),
        ("\u00e9" * 128, None),
        ("a/" * 2048 + "a", None),
    ],
)
def test_non_canonical_paths_are_refused_with_the_canonical_spelling_where_one_exists(
    path: str, suggestion: str | None
) -> None:
    error = refusal(path)

    assert error.code == TOOL_WORKSPACE_PATH_INVALID == "TOOL_WORKSPACE_PATH_INVALID"
    assert isinstance(error, ToolError)
    assert isinstance(error, ValueError)
    assert error.suggestion == suggestion
    assert "is not canonical" in str(error)
    if suggestion is not None:
        assert str(error).endswith(f"; use {suggestion!r}")


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("x/../secrets/key", "it contains '..', which is never allowed"),
        ("/etc/passwd", "it is absolute"),
        (".", "it names the workspace root, not a file"),
        ("a\x00b", "unprintable character U+0000"),
        ("a\u202eb", "unprintable character U+202E"),
        ("secrets\\key", "backslash"),
        ("x" * 256, "longer than 255 bytes"),
        ("a" * (WORKSPACE_PATH_MAX_CHARS + 1), "longer than 4096 characters"),
        ("cafe\u0301", "normalisation form C"),
    ],
)
def test_the_message_says_why(path: str, reason: str) -> None:
    assert reason in str(refusal(path))


def test_the_root_is_named_dot_where_a_tool_allows_it() -> None:
    assert WORKSPACE_ROOT_PATH == "."
    assert check_workspace_path(".", allow_root=True) == "."
    assert refusal("./", allow_root=True).suggestion == "."
    assert refusal("", allow_root=True).suggestion == "."
    assert refusal(".", allow_root=False).suggestion is None
    # Everything else follows the same rules with or without the root.
    assert refusal("./src", allow_root=True).suggestion == "src"
    assert refusal("src/..", allow_root=True).suggestion is None


def test_a_long_hostile_path_is_shortened_in_the_message() -> None:
    error = refusal("../" * 100_000)

    assert len(str(error)) < 400
    assert "(300000 characters)" in str(error)


class StrSubclass(str):
    """A ``str`` subclass, which could override comparison or splitting."""


@pytest.mark.parametrize("value", [None, b"a", 5, ["a"], StrSubclass("a")])
def test_a_non_string_path_is_refused_with_the_typed_error(value: object) -> None:
    with pytest.raises(InvalidWorkspacePathError) as caught:
        check_workspace_path(loose(value))

    assert caught.value.code == TOOL_WORKSPACE_PATH_INVALID
    assert caught.value.suggestion is None


def test_the_error_pickles_with_its_code_message_and_suggestion() -> None:
    error = refusal("./a")

    copy = pickle.loads(pickle.dumps(error))

    assert type(copy) is InvalidWorkspacePathError
    assert (copy.code, copy.message, copy.suggestion) == (error.code, error.message, "a")


# ------------------------------------------------------------------ properties


def independently_canonical(path: str) -> bool:
    """The grammar, restated without the module's code."""
    segments = path.split("/")
    return (
        1 <= len(path) <= WORKSPACE_PATH_MAX_CHARS
        and path.isprintable()
        and "\\" not in path
        and unicodedata.normalize("NFC", path) == path
        and all(segment not in ("", ".", "..") for segment in segments)
        and all(len(segment.encode("utf-8")) <= WORKSPACE_SEGMENT_MAX_BYTES for segment in segments)
    )


def outcome(path: str, *, allow_root: bool) -> str | InvalidWorkspacePathError:
    """The accepted path, or the typed refusal; any other exception escapes."""
    try:
        return check_workspace_path(path, allow_root=allow_root)
    except InvalidWorkspacePathError as error:
        return error


@PROPERTIES
@given(path=any_paths, allow_root=st.booleans())
def test_every_path_is_returned_unchanged_or_refused_with_the_typed_error(
    path: str, allow_root: bool
) -> None:
    result = outcome(path, allow_root=allow_root)
    root = path == "." and allow_root

    if isinstance(result, InvalidWorkspacePathError):
        assert result.code == TOOL_WORKSPACE_PATH_INVALID
        assert not independently_canonical(path)
        assert not root
        return
    assert result is path
    assert independently_canonical(path) or root
    # A canonical path is already what lexical normalisation would make of it, so a
    # lexical resolver (posixpath, LocalWorkspace's parser) cannot change it.
    assert posixpath.normpath(path) == path
    assert not path.startswith("/")


@pytest.mark.slow
@PROPERTIES
@given(path=any_paths, allow_root=st.booleans())
def test_a_suggestion_is_canonical_and_names_the_same_path(path: str, allow_root: bool) -> None:
    result = outcome(path, allow_root=allow_root)
    if not isinstance(result, InvalidWorkspacePathError) or result.suggestion is None:
        return
    suggestion = result.suggestion

    assert check_workspace_path(suggestion, allow_root=allow_root) == suggestion
    assert ".." not in path.replace("\\", "/").split("/")
    assert not path.startswith("/")
    assert posixpath.normpath(unicodedata.normalize("NFC", path.replace("\\", "/"))) == suggestion


@pytest.mark.slow
@PROPERTIES
@given(segments=st.lists(canonical_segments, min_size=1, max_size=8))
def test_paths_joined_from_canonical_segments_are_accepted(segments: list[str]) -> None:
    path = unicodedata.normalize("NFC", "/".join(segments))
    if not independently_canonical(path):
        return  # too long, once joined

    assert check_workspace_path(path) is path
