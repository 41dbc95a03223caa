"""``open_workspace`` and ``WorkspacePathScope``: lexical path containment (spec §3.11)."""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_workspace import (
    WORKSPACE_CAPABILITIES,
    WorkspaceEscapesRootError,
    WorkspaceOperationUnsupportedError,
    WorkspacePathScope,
    bind_workspace,
    open_workspace,
)

pytestmark = pytest.mark.skipif(os.sep != "/", reason="the expected paths are POSIX paths")

ROOT = "/srv/work"
ROOT_PARTS = ["srv", "work"]


def escape_message(requested: str, root: str) -> str:
    return f'path "{requested}" escapes the workspace root "{root}"'


def lexical_parts(start: list[str], segments: Iterable[str]) -> list[str]:
    """Apply path segments to a list of components the way a lexical normaliser does."""
    parts = list(start)
    for segment in segments:
        if segment in ("", "."):
            continue
        if segment == "..":
            if parts:
                parts.pop()
            continue
        parts.append(segment)
    return parts


# ------------------------------------------------------------------ the root


def test_an_absolute_root_is_kept_normalised() -> None:
    assert open_workspace(ROOT).root == ROOT


@pytest.mark.parametrize(
    ("given_root", "expected"),
    [
        pytest.param("/srv/work/", "/srv/work", id="trailing-separator"),
        pytest.param("/srv//work", "/srv/work", id="doubled-separator"),
        pytest.param("/srv/./work", "/srv/work", id="dot-segment"),
        pytest.param("/srv/other/../work", "/srv/work", id="dot-dot-segment"),
        pytest.param("/", "/", id="filesystem-root"),
    ],
)
def test_the_root_is_the_abspath_of_the_given_root(given_root: str, expected: str) -> None:
    assert open_workspace(given_root).root == expected
    assert open_workspace(given_root).root == os.path.abspath(given_root)


def test_a_relative_root_is_made_absolute_against_the_current_directory(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    scope = open_workspace("checkout/../project")
    assert scope.root == os.path.join(os.path.abspath(tmp_path), "project")
    assert scope.root == os.path.abspath("checkout/../project")


def test_a_path_like_root_is_accepted() -> None:
    assert open_workspace(pathlib.PurePosixPath("/srv/work")).root == ROOT


def test_opening_a_scope_needs_no_existing_directory(tmp_path: pathlib.Path) -> None:
    missing = tmp_path / "does" / "not" / "exist"
    scope = open_workspace(str(missing))
    assert scope.root == str(missing)
    assert scope.resolve_path("file.txt") == str(missing / "file.txt")
    assert not missing.exists()


def test_open_workspace_returns_a_path_scope() -> None:
    assert type(open_workspace(ROOT)) is WorkspacePathScope


# ------------------------------------------------------------------ resolving requests


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        pytest.param("README.md", "/srv/work/README.md", id="file"),
        pytest.param("src/app.py", "/srv/work/src/app.py", id="nested"),
        pytest.param("src/./app.py", "/srv/work/src/app.py", id="dot"),
        pytest.param("src//app.py", "/srv/work/src/app.py", id="doubled-separator"),
        pytest.param("src/lib/../app.py", "/srv/work/src/app.py", id="dot-dot-inside"),
        pytest.param("src/", "/srv/work/src", id="trailing-separator"),
        pytest.param(".", "/srv/work", id="current-directory"),
        pytest.param("", "/srv/work", id="empty"),
        pytest.param("src/..", "/srv/work", id="back-to-root"),
        pytest.param("../work/a", "/srv/work/a", id="out-and-back-in"),
        pytest.param("...", "/srv/work/...", id="three-dots-is-a-name"),
        pytest.param("..hidden", "/srv/work/..hidden", id="dot-dot-prefixed-name"),
    ],
)
def test_a_relative_request_resolves_against_the_root(requested: str, expected: str) -> None:
    assert open_workspace(ROOT).resolve_path(requested) == expected


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        pytest.param("/srv/work", "/srv/work", id="the-root"),
        pytest.param("/srv/work/", "/srv/work", id="the-root-with-separator"),
        pytest.param("/srv/work/src/app.py", "/srv/work/src/app.py", id="inside"),
        pytest.param("/srv/work/src/../app.py", "/srv/work/app.py", id="dot-dot-inside"),
        pytest.param("/srv/other/../work/x", "/srv/work/x", id="out-and-back-in"),
        pytest.param("///srv/work/x", "/srv/work/x", id="three-leading-separators"),
    ],
)
def test_an_absolute_request_is_normalised_and_accepted_inside_the_root(
    requested: str, expected: str
) -> None:
    assert open_workspace(ROOT).resolve_path(requested) == expected


@pytest.mark.parametrize(
    "requested",
    [
        pytest.param("..", id="parent"),
        pytest.param("../x", id="sibling-file"),
        pytest.param("a/../../x", id="down-then-out"),
        pytest.param("../../../../../../etc/passwd", id="far-out"),
        pytest.param("../work-evil/x", id="relative-sibling-with-shared-prefix"),
        pytest.param("/etc/passwd", id="absolute-elsewhere"),
        pytest.param("/srv", id="absolute-parent"),
        pytest.param("/", id="filesystem-root"),
        pytest.param("/srv/work-evil", id="absolute-sibling-with-shared-prefix"),
        pytest.param("/srv/work-evil/x", id="inside-sibling-with-shared-prefix"),
        pytest.param("/srv/workx", id="sibling-extending-the-name"),
        pytest.param("/srv/work/../work-evil", id="normalised-into-sibling"),
        pytest.param("//srv/work", id="double-leading-separator-root"),
        pytest.param("//srv/work/a", id="double-leading-separator-inside"),
    ],
)
def test_a_request_outside_the_root_raises_escapes_root(requested: str) -> None:
    with pytest.raises(WorkspaceEscapesRootError) as caught:
        open_workspace(ROOT).resolve_path(requested)
    assert isinstance(caught.value, ValueError)
    assert caught.value.requested == requested
    assert caught.value.root == ROOT
    assert str(caught.value) == escape_message(requested, ROOT)


def test_the_escape_error_reports_the_normalised_root_not_the_given_one() -> None:
    with pytest.raises(WorkspaceEscapesRootError) as caught:
        open_workspace("/srv/./work/").resolve_path("../x")
    assert caught.value.root == ROOT
    assert str(caught.value) == escape_message("../x", ROOT)


def test_the_escape_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="escapes the workspace root"):
        open_workspace(ROOT).resolve_path("..")


def test_a_root_with_a_trailing_separator_still_excludes_a_sibling_with_a_shared_prefix() -> None:
    scope = open_workspace("/srv/work/")
    with pytest.raises(WorkspaceEscapesRootError):
        scope.resolve_path("/srv/work-evil/x")
    assert scope.resolve_path("/srv/work/x") == "/srv/work/x"


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        pytest.param("etc/passwd", "/etc/passwd", id="relative"),
        pytest.param("/etc/passwd", "/etc/passwd", id="absolute"),
        pytest.param("..", "/", id="parent-of-root"),
        pytest.param("../../..", "/", id="far-above-root"),
        pytest.param("/../../tmp", "/tmp", id="absolute-above-root"),
        pytest.param("", "/", id="empty"),
    ],
)
def test_the_filesystem_root_contains_everything(requested: str, expected: str) -> None:
    assert open_workspace("/").resolve_path(requested) == expected


def test_resolution_does_not_follow_symbolic_links(tmp_path: pathlib.Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(outside, target_is_directory=True)
    scope = open_workspace(str(root))
    assert scope.resolve_path("link/secret.txt") == os.path.join(scope.root, "link", "secret.txt")


# ------------------------------------------------------------------ properties

SEGMENT = st.one_of(
    st.sampled_from(["..", ".", "", "srv", "work", "work-evil", "a"]),
    st.text(alphabet="aw.-", min_size=1, max_size=4),
)


@pytest.mark.slow
@settings(max_examples=500, deadline=None, database=None)
@given(st.lists(SEGMENT, max_size=12))
def test_a_relative_request_resolves_inside_the_root_or_raises_exactly_when_it_leaves(
    segments: list[str],
) -> None:
    requested = "/".join(segments)
    if requested.startswith("/"):
        requested = "." + requested  # keep the request relative
    scope = open_workspace(ROOT)
    final = lexical_parts(ROOT_PARTS, requested.split("/"))
    leaves = final[: len(ROOT_PARTS)] != ROOT_PARTS
    if leaves:
        with pytest.raises(WorkspaceEscapesRootError) as caught:
            scope.resolve_path(requested)
        assert caught.value.requested == requested
        assert caught.value.root == ROOT
        return
    resolved = scope.resolve_path(requested)
    assert resolved == ROOT or resolved.startswith(ROOT + os.sep)
    assert resolved == "/" + "/".join(final)


@pytest.mark.slow
@settings(max_examples=500, deadline=None, database=None)
@given(st.lists(SEGMENT, max_size=12))
def test_an_absolute_request_resolves_inside_the_root_or_raises_exactly_when_it_leaves(
    segments: list[str],
) -> None:
    requested = "/" + "/".join(segments)
    scope = open_workspace(ROOT)
    leading = len(requested) - len(requested.lstrip("/"))
    final = lexical_parts([], requested.split("/"))
    # A path that keeps exactly two leading separators names another root (fail closed).
    leaves = leading == 2 or final[: len(ROOT_PARTS)] != ROOT_PARTS
    if leaves:
        with pytest.raises(WorkspaceEscapesRootError) as caught:
            scope.resolve_path(requested)
        assert caught.value.requested == requested
        assert caught.value.root == ROOT
        return
    resolved = scope.resolve_path(requested)
    assert resolved == ROOT or resolved.startswith(ROOT + os.sep)
    assert resolved == "/" + "/".join(final)


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(SEGMENT, max_size=12))
def test_resolving_is_idempotent_for_accepted_paths(segments: list[str]) -> None:
    scope = open_workspace(ROOT)
    requested = "/".join(segments)
    try:
        resolved = scope.resolve_path(requested)
    except WorkspaceEscapesRootError:
        return
    assert scope.resolve_path(resolved) == resolved


# ------------------------------------------------------------------ a helper, not a capability


def test_the_public_names_of_a_scope_are_only_root_and_resolve_path() -> None:
    scope = open_workspace(ROOT)
    assert {name for name in dir(scope) if not name.startswith("_")} == {"root", "resolve_path"}


@pytest.mark.parametrize("operation", WORKSPACE_CAPABILITIES)
def test_a_scope_has_no_workspace_operation(operation: str) -> None:
    assert not hasattr(open_workspace(ROOT), operation)


def test_a_scope_cannot_be_bound_as_a_workspace() -> None:
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        bind_workspace(open_workspace(ROOT))
    assert caught.value.operation == "read_file"


@pytest.mark.parametrize("name", ["root", "resolve_path", "read_file", "extra"])
def test_a_scope_refuses_attribute_assignment(name: str) -> None:
    scope = open_workspace(ROOT)
    with pytest.raises(AttributeError):
        setattr(scope, name, "/")
    assert scope.root == ROOT


@pytest.mark.parametrize("name", ["root", "resolve_path"])
def test_a_scope_refuses_attribute_deletion(name: str) -> None:
    scope = open_workspace(ROOT)
    with pytest.raises(AttributeError):
        delattr(scope, name)
    assert scope.root == ROOT


def test_a_scope_keeps_refusing_escapes_after_a_refused_root_change() -> None:
    scope = open_workspace(ROOT)
    with pytest.raises(AttributeError):
        setattr(scope, "root", "/")  # noqa: B010  # the point is a dynamic write
    with pytest.raises(WorkspaceEscapesRootError):
        scope.resolve_path("/etc/passwd")
