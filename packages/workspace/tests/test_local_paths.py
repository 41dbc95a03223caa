"""``LocalWorkspace`` path containment: a corpus of hostile paths, and a property over generated ones.

Every test runs against both resolvers: ``openat2`` (kernel-enforced) and the fallback
component walk. Both refuse every symlink, in any component, and report each refusal with
the same code: the corpora below give one expected code per path.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat
from collections.abc import Iterator
from pathlib import Path

import hypothesis
import pytest
import trio
from hypothesis import strategies

from harness_workspace.local import (
    WORKSPACE_NOT_A_DIRECTORY,
    WORKSPACE_NOT_A_FILE,
    WORKSPACE_NOT_FOUND,
    WORKSPACE_PATH_ESCAPES_ROOT,
    WORKSPACE_PATH_INVALID,
    WORKSPACE_PATH_TOO_LONG,
    WORKSPACE_SYMLINK_REFUSED,
    LocalWorkspace,
    LocalWorkspaceError,
    ResolverChoice,
)

RESOLVERS: tuple[ResolverChoice, ...] = ("openat2", "walk")
SECRET = "SECRET-OUTSIDE-THE-ROOT"
INSIDE = "inside"


def build_tree(base: Path) -> tuple[Path, Path]:
    """A root full of traps next to a sentinel directory that must never be touched."""
    outside = base / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    root = base / "root"
    (root / "dir").mkdir(parents=True)
    (root / "dir" / "file.txt").write_text(INSIDE)
    (root / "link_out").symlink_to(outside)
    (root / "link_rel_out").symlink_to("../outside")
    (root / "dir" / "link_up_out").symlink_to("../../outside/secret.txt")
    (root / "link_magic").symlink_to("/proc/self/root")
    (root / "link_chain1").symlink_to("link_chain2")
    (root / "link_chain2").symlink_to("link_out")
    (root / "dangling").symlink_to("does-not-exist")
    (root / "link_devzero").symlink_to("/dev/zero")
    (root / "link_in").symlink_to("dir")
    (root / "link_loop").symlink_to("link_loop")
    os.mkfifo(root / "fifo")
    return root, outside


def fingerprint(directory: Path) -> dict[str, str]:
    """Every entry below ``directory`` with a digest of its content (links by target)."""
    result: dict[str, str] = {}
    for current, directories, files in os.walk(directory):
        for name in directories + files:
            full = Path(current, name)
            key = str(full.relative_to(directory))
            if full.is_symlink():
                result[key] = "link:" + os.readlink(full)
            elif full.is_file():
                result[key] = hashlib.sha256(full.read_bytes()).hexdigest()
            else:
                result[key] = "dir" if full.is_dir() else "other"
    return result


@pytest.fixture(params=RESOLVERS)
def resolver(request: pytest.FixtureRequest) -> ResolverChoice:
    return request.param


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    root, outside = build_tree(tmp_path)
    before = fingerprint(outside)
    yield root, outside
    assert fingerprint(outside) == before, "the directory outside the root changed"


# (path, code), for both resolvers
READ_CORPUS: list[tuple[str, str]] = [
    ("", WORKSPACE_PATH_INVALID),
    ("/", WORKSPACE_PATH_INVALID),
    ("/etc/passwd", WORKSPACE_PATH_INVALID),
    ("//etc/passwd", WORKSPACE_PATH_INVALID),
    ("dir/\x00file.txt", WORKSPACE_PATH_INVALID),
    ("\x00", WORKSPACE_PATH_INVALID),
    ("\ud800", WORKSPACE_PATH_INVALID),
    ("..", WORKSPACE_PATH_ESCAPES_ROOT),
    ("../outside/secret.txt", WORKSPACE_PATH_ESCAPES_ROOT),
    ("./../outside/secret.txt", WORKSPACE_PATH_ESCAPES_ROOT),
    ("dir/../../outside/secret.txt", WORKSPACE_PATH_ESCAPES_ROOT),
    ("a/../../x", WORKSPACE_PATH_ESCAPES_ROOT),
    ("dir/file.txt/../../..", WORKSPACE_PATH_ESCAPES_ROOT),
    ("dir/..", WORKSPACE_NOT_A_FILE),
    ("x" * 256, WORKSPACE_PATH_TOO_LONG),
    ("é" * 128, WORKSPACE_PATH_TOO_LONG),
    ("a/" * 2048 + "a", WORKSPACE_PATH_TOO_LONG),
    ("link_out/secret.txt", WORKSPACE_PATH_ESCAPES_ROOT),
    ("link_out", WORKSPACE_PATH_ESCAPES_ROOT),
    ("link_rel_out/secret.txt", WORKSPACE_PATH_ESCAPES_ROOT),
    ("dir/link_up_out", WORKSPACE_PATH_ESCAPES_ROOT),
    ("link_magic/etc/hostname", WORKSPACE_PATH_ESCAPES_ROOT),
    ("link_magic", WORKSPACE_PATH_ESCAPES_ROOT),
    ("link_chain1/secret.txt", WORKSPACE_SYMLINK_REFUSED),
    ("link_loop", WORKSPACE_SYMLINK_REFUSED),
    ("dangling", WORKSPACE_SYMLINK_REFUSED),
    ("link_devzero", WORKSPACE_PATH_ESCAPES_ROOT),
    ("fifo", WORKSPACE_NOT_A_FILE),
    ("dir", WORKSPACE_NOT_A_FILE),
    (".", WORKSPACE_NOT_A_FILE),
    ("dir/file.txt/x", WORKSPACE_NOT_A_DIRECTORY),
    ("missing.txt", WORKSPACE_NOT_FOUND),
    ("missing/file.txt", WORKSPACE_NOT_FOUND),
]


@pytest.mark.parametrize(("path", "code"), READ_CORPUS)
async def test_hostile_paths_are_refused_by_read_file_with_their_code(
    tree: tuple[Path, Path], resolver: ResolverChoice, path: str, code: str
) -> None:
    ws = LocalWorkspace(tree[0], resolver=resolver)
    try:
        with trio.fail_after(5), pytest.raises(LocalWorkspaceError) as caught:
            await ws.read_file(path)
        assert caught.value.code == code
        assert caught.value.operation == "read_file"
        assert SECRET not in str(caught.value)
    finally:
        await ws.dispose()


WRITE_CORPUS: list[tuple[str, str]] = [
    ("", WORKSPACE_PATH_INVALID),
    ("/tmp/new.txt", WORKSPACE_PATH_INVALID),
    ("new\x00.txt", WORKSPACE_PATH_INVALID),
    ("../outside/new.txt", WORKSPACE_PATH_ESCAPES_ROOT),
    ("../outside/secret.txt", WORKSPACE_PATH_ESCAPES_ROOT),
    ("dir/../../outside/secret.txt", WORKSPACE_PATH_ESCAPES_ROOT),
    ("link_out/secret.txt", WORKSPACE_PATH_ESCAPES_ROOT),
    ("link_out/new.txt", WORKSPACE_PATH_ESCAPES_ROOT),
    ("link_rel_out/new.txt", WORKSPACE_PATH_ESCAPES_ROOT),
    ("link_chain1/new.txt", WORKSPACE_SYMLINK_REFUSED),
    ("link_magic/tmp/new.txt", WORKSPACE_PATH_ESCAPES_ROOT),
    ("dir/link_up_out", WORKSPACE_SYMLINK_REFUSED),
    ("link_out", WORKSPACE_SYMLINK_REFUSED),
    ("dangling", WORKSPACE_SYMLINK_REFUSED),
    ("link_devzero", WORKSPACE_SYMLINK_REFUSED),
    ("fifo", WORKSPACE_NOT_A_FILE),
    ("dir", WORKSPACE_NOT_A_FILE),
    (".", WORKSPACE_NOT_A_FILE),
    ("x" * 256, WORKSPACE_PATH_TOO_LONG),
    ("missing/new.txt", WORKSPACE_NOT_FOUND),
    ("dir/file.txt/new.txt", WORKSPACE_NOT_A_DIRECTORY),
]


@pytest.mark.parametrize(("path", "code"), WRITE_CORPUS)
async def test_hostile_paths_are_refused_by_write_file_with_their_code(
    tree: tuple[Path, Path], resolver: ResolverChoice, path: str, code: str
) -> None:
    root = tree[0]
    before = fingerprint(root)
    ws = LocalWorkspace(root, resolver=resolver)
    try:
        with trio.fail_after(5), pytest.raises(LocalWorkspaceError) as caught:
            await ws.write_file(path, "written")
        assert caught.value.code == code
        assert caught.value.operation == "write_file"
    finally:
        await ws.dispose()
    assert fingerprint(root) == before, "a refused write changed the root"


LIST_CORPUS: list[tuple[str, str]] = [
    ("/etc", WORKSPACE_PATH_INVALID),
    ("..", WORKSPACE_PATH_ESCAPES_ROOT),
    ("dir/../..", WORKSPACE_PATH_ESCAPES_ROOT),
    ("link_out", WORKSPACE_PATH_ESCAPES_ROOT),
    ("link_rel_out", WORKSPACE_PATH_ESCAPES_ROOT),
    ("link_magic", WORKSPACE_PATH_ESCAPES_ROOT),
    ("link_magic/proc/self/root", WORKSPACE_PATH_ESCAPES_ROOT),
    ("link_chain1", WORKSPACE_SYMLINK_REFUSED),
    ("dir\x00", WORKSPACE_PATH_INVALID),
    ("missing", WORKSPACE_NOT_FOUND),
]


@pytest.mark.parametrize(("path", "code"), LIST_CORPUS)
async def test_hostile_paths_are_refused_by_list_files_with_their_code(
    tree: tuple[Path, Path], resolver: ResolverChoice, path: str, code: str
) -> None:
    ws = LocalWorkspace(tree[0], resolver=resolver)
    try:
        with pytest.raises(LocalWorkspaceError) as caught:
            await ws.list_files(path)
        assert caught.value.code == code
    finally:
        await ws.dispose()


async def test_listing_the_root_shows_links_by_name_without_following_them(
    tree: tuple[Path, Path], resolver: ResolverChoice
) -> None:
    ws = LocalWorkspace(tree[0], resolver=resolver)
    try:
        with trio.fail_after(5):
            listed = await ws.list_files("")
    finally:
        await ws.dispose()
    assert "dir/file.txt" in listed
    assert "link_out" in listed
    assert not any("secret" in name for name in listed)


async def test_symlinks_within_the_root_are_refused_by_both_resolvers(
    tree: tuple[Path, Path], resolver: ResolverChoice
) -> None:
    # A link inside the root would let a permission check judge one path ("link_in/x")
    # while another file ("dir/x") is opened, so it is refused like any other link.
    root = tree[0]
    before = fingerprint(root)
    ws = LocalWorkspace(root, resolver=resolver)
    try:
        attempts = {
            "read_file": ws.read_file("link_in/file.txt"),
            "write_file": ws.write_file("link_in/new.txt", "x"),
            "list_files": ws.list_files("link_in"),
        }
        for operation, attempt in attempts.items():
            with pytest.raises(LocalWorkspaceError) as caught:
                await attempt
            assert caught.value.code == WORKSPACE_SYMLINK_REFUSED, operation
            assert "'link_in' is a symlink" in str(caught.value), operation
    finally:
        await ws.dispose()
    assert fingerprint(root) == before


@pytest.mark.parametrize(
    ("link", "target", "requested", "code"),
    [
        ("src/notes.txt", "../secrets/key", "src/notes.txt", WORKSPACE_SYMLINK_REFUSED),
        ("src/alias", "../secrets", "src/alias/key", WORKSPACE_SYMLINK_REFUSED),
        ("src/deep/up", "../../..", "src/deep/up/outside/secret.txt", WORKSPACE_PATH_ESCAPES_ROOT),
        ("src/abs", "/etc", "src/abs/hostname", WORKSPACE_PATH_ESCAPES_ROOT),
    ],
)
async def test_a_refused_link_is_named_root_relative_without_its_target(
    tmp_path: Path, resolver: ResolverChoice, *, link: str, target: str, requested: str, code: str
) -> None:
    root = tmp_path / "root"
    (root / "secrets").mkdir(parents=True)
    (root / "secrets" / "key").write_text(SECRET)
    (root / "src" / "deep").mkdir(parents=True)
    (root / link).symlink_to(target)
    ws = LocalWorkspace(root, resolver=resolver)
    try:
        with pytest.raises(LocalWorkspaceError) as caught:
            await ws.read_file(requested)
    finally:
        await ws.dispose()
    assert caught.value.code == code
    assert f"{link!r} is a symlink" in str(caught.value)
    assert target not in str(caught.value)
    assert SECRET not in str(caught.value)


async def test_proc_magic_links_are_refused_even_when_the_root_is_under_proc(
    resolver: ResolverChoice,
) -> None:
    # /proc/self/root and /proc/self/cwd are magic links: openat2 refuses them with
    # RESOLVE_NO_MAGICLINKS, the walk refuses them as symlinks that point out.
    ws = LocalWorkspace("/proc/self", resolver=resolver)
    try:
        for path in ("root/etc/hostname", "cwd", "exe", "fd/0"):
            with pytest.raises(LocalWorkspaceError) as caught:
                await ws.read_file(path)
            assert caught.value.code in {WORKSPACE_SYMLINK_REFUSED, WORKSPACE_PATH_ESCAPES_ROOT}, path
    finally:
        await ws.dispose()


async def test_dot_components_and_inner_dotdot_resolve_lexically_inside_the_root(
    tree: tuple[Path, Path], resolver: ResolverChoice
) -> None:
    ws = LocalWorkspace(tree[0], resolver=resolver)
    try:
        for path in (
            "dir/file.txt",
            "./dir/file.txt",
            "dir//file.txt",
            "a/../dir/./file.txt",
            "dir/file.txt/",
        ):
            assert await ws.read_file(path) == INSIDE, path
    finally:
        await ws.dispose()


# -- the property: any path string is either inside the root or a typed error ----------

_PIECES = [
    "dir",
    "file.txt",
    "new.txt",
    "..",
    ".",
    "",
    "link_out",
    "link_rel_out",
    "link_in",
    "link_chain1",
    "link_magic",
    "link_up_out",
    "dangling",
    "fifo",
    "outside",
    "secret.txt",
    "proc",
    "self",
    "\x00",
]
_paths = strategies.one_of(
    strategies.lists(strategies.sampled_from(_PIECES), max_size=6).map("/".join),
    strategies.lists(strategies.sampled_from(_PIECES), max_size=6).map(lambda parts: "/" + "/".join(parts)),
    strategies.text(max_size=40),
)


def _inside(root: Path, relative: str) -> bool:
    parent = os.path.realpath(os.path.join(root, os.path.dirname(relative)))
    return parent == str(root) or parent.startswith(str(root) + os.sep)


@pytest.mark.slow
@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(path=_paths, operation=strategies.sampled_from(["read_file", "write_file", "list_files"]))
def test_any_path_is_either_inside_the_root_or_a_typed_error(
    tmp_path_factory: pytest.TempPathFactory, path: str, operation: str
) -> None:
    base = tmp_path_factory.mktemp("property")
    root, outside = build_tree(base)
    root = root.resolve()
    before = fingerprint(outside)

    async def attempt(resolver: ResolverChoice) -> None:
        ws = LocalWorkspace(root, resolver=resolver)
        try:
            with trio.fail_after(5):
                if operation == "read_file":
                    assert await ws.read_file(path) != SECRET
                elif operation == "write_file":
                    await ws.write_file(path, "generated")
                else:
                    for listed in await ws.list_files(path):
                        assert _inside(root, listed), listed
                        assert (root / listed).is_symlink() or (root / listed).exists(), listed
        except LocalWorkspaceError:
            pass
        finally:
            await ws.dispose()

    for resolver in RESOLVERS:
        trio.run(attempt, resolver)
    assert fingerprint(outside) == before


def _outcome(root: Path, resolver: ResolverChoice, path: str) -> tuple[str, str]:
    async def read() -> tuple[str, str]:
        ws = LocalWorkspace(root, resolver=resolver)
        try:
            with trio.fail_after(5):
                return "read", await ws.read_file(path)
        except LocalWorkspaceError as error:
            return "refused", error.code
        finally:
            await ws.dispose()

    return trio.run(read)


@pytest.mark.slow
@hypothesis.settings(max_examples=300, deadline=None)
@hypothesis.given(path=_paths)
def test_both_resolvers_agree_and_read_only_the_regular_file_the_path_names(
    tmp_path_factory: pytest.TempPathFactory, path: str
) -> None:
    root, _ = build_tree(tmp_path_factory.mktemp("agree"))
    root = root.resolve()

    outcomes = {resolver: _outcome(root, resolver, path) for resolver in RESOLVERS}

    assert outcomes["openat2"] == outcomes["walk"], outcomes
    kind, value = outcomes["walk"]
    hypothesis.event(kind)
    if kind == "refused":
        return
    # What was read is the regular file at the lexical path, reached through no link: the
    # path a permission check judged is the file that was opened.
    named = posixpath.normpath(path)
    parts = named.split("/")
    for depth in range(1, len(parts) + 1):
        assert not (root / "/".join(parts[:depth])).is_symlink(), named
    assert stat.S_ISREG(os.lstat(root / named).st_mode)
    assert value == (root / named).read_text()
