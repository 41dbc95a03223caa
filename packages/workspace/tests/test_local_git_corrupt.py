"""The git reader on corrupt, forged and oversized repository data: typed errors, bounded work.

Objects, packs and indexes are written by hand here (the real git would refuse to make
them): a flipped byte, an object stored under another's id, zlib bombs, sizes that lie,
truncated packs, delta chains that loop or copy outside their base.
"""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import threading
import zlib
from pathlib import Path

import pytest
import trio
from workspace_git_repositories import GIT_ENVIRONMENT, commit_all, git, init, reference_tree, workspace_diff

from harness_workspace.local import (
    WORKSPACE_DISPOSED,
    WORKSPACE_GIT_FAILED,
    WORKSPACE_GIT_TOO_LARGE,
    LocalWorkspace,
    LocalWorkspaceError,
)
from harness_workspace.local._diff import git_diff, git_snapshot
from harness_workspace.local._git.bounds import Budget, ReaderLimits

REF_DELTA = 7
BLOB = 3


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    root = init(tmp_path / "repo")
    (root / "a.txt").write_text("one\ntwo\nthree\n")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("bee\n")
    commit_all(root)
    (root / "a.txt").write_text("one\n2\nthree\n")
    return root


def object_id(root: Path, name: str) -> bytes:
    return bytes.fromhex(git(root, "rev-parse", name).strip())


def raw_blob(root: Path, name: str) -> bytes:
    completed = subprocess.run(
        ["git", "cat-file", "blob", name],
        cwd=root,
        env=GIT_ENVIRONMENT,
        capture_output=True,
        check=True,
    )
    return completed.stdout


def raw_tree(root: Path, name: str) -> bytes:
    completed = subprocess.run(
        ["git", "cat-file", "tree", name], cwd=root, env=GIT_ENVIRONMENT, capture_output=True, check=True
    )
    return completed.stdout


def loose_path(root: Path, identifier: bytes) -> Path:
    text = identifier.hex()
    return root / ".git" / "objects" / text[:2] / text[2:]


def replace_loose(root: Path, identifier: bytes, compressed: bytes) -> None:
    path = loose_path(root, identifier)
    path.parent.mkdir(exist_ok=True)
    if path.exists():
        path.unlink()
    path.write_bytes(compressed)


def pack_entry(kind: int, size: int, payload: bytes, base_id: bytes = b"") -> bytes:
    """A pack entry: the type and (claimed) size header, a REF_DELTA base, zlib data."""
    header = bytearray()
    byte = (kind << 4) | (size & 15)
    size >>= 4
    while size:
        header.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    header.append(byte)
    return bytes(header) + base_id + zlib.compress(payload)


def write_pack(root: Path, entries: list[tuple[bytes, bytes]]) -> Path:
    """Write a version 2 pack and index holding ``(object id, raw entry)`` pairs."""
    body = b"PACK" + struct.pack(">II", 2, len(entries))
    offsets: dict[bytes, int] = {}
    for identifier, raw in entries:
        offsets[identifier] = len(body)
        body += raw
    checksum = hashlib.sha1(body).digest()
    identifiers = sorted(offsets)
    fanout = [sum(1 for identifier in identifiers if identifier[0] <= first) for first in range(256)]
    index = b"\377tOc" + struct.pack(">I", 2) + struct.pack(">256I", *fanout) + b"".join(identifiers)
    index += b"\0\0\0\0" * len(identifiers) + b"".join(struct.pack(">I", offsets[i]) for i in identifiers)
    index += checksum
    index += hashlib.sha1(index).digest()
    folder = root / ".git" / "objects" / "pack"
    folder.mkdir(exist_ok=True)
    (folder / f"pack-{checksum.hex()}.idx").write_bytes(index)
    pack = folder / f"pack-{checksum.hex()}.pack"
    pack.write_bytes(body + checksum)
    return pack


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def insert_delta(base_size: int, result: bytes) -> bytes:
    """A delta that ignores its base and inserts ``result``."""
    chunks = [bytes([len(result[i : i + 127])]) + result[i : i + 127] for i in range(0, len(result), 127)]
    return varint(base_size) + varint(len(result)) + b"".join(chunks)


async def diff_error(root: Path) -> LocalWorkspaceError:
    with trio.fail_after(60), pytest.raises(LocalWorkspaceError) as caught:
        await workspace_diff(root)
    return caught.value


def read_directly(root: Path, operation: str, limits: ReaderLimits, *, timeout_ms: int = 30_000) -> object:
    """Run the reader itself with ``limits`` (the adapter always uses the defaults)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        budget = Budget(operation, limits, timeout_ms=timeout_ms)
        if operation == "diff":
            return git_diff(fd, budget, max_output_bytes=1 << 30)
        return git_snapshot(fd, budget)
    finally:
        os.close(fd)


# -- loose objects ------------------------------------------------------------------


async def test_a_flipped_byte_in_a_loose_object_is_a_typed_failure(repository: Path) -> None:
    blob = object_id(repository, "HEAD:a.txt")
    data = bytearray(loose_path(repository, blob).read_bytes())
    data[len(data) // 2] ^= 0xFF
    replace_loose(repository, blob, bytes(data))

    assert (await diff_error(repository)).code == WORKSPACE_GIT_FAILED


async def test_an_object_stored_under_another_id_is_refused(repository: Path) -> None:
    blob = object_id(repository, "HEAD:a.txt")
    other = object_id(repository, "HEAD:sub/b.txt")
    replace_loose(repository, blob, loose_path(repository, other).read_bytes())

    error = await diff_error(repository)

    assert error.code == WORKSPACE_GIT_FAILED
    assert "another id" in error.message


@pytest.mark.slow
async def test_a_loose_zlib_bomb_stops_at_its_declared_size(repository: Path) -> None:
    blob = object_id(repository, "HEAD:a.txt")
    replace_loose(repository, blob, zlib.compress(b"blob 14\0" + b"\0" * (256 * 1024 * 1024), 9))

    assert (await diff_error(repository)).code == WORKSPACE_GIT_FAILED


async def test_a_loose_object_claiming_a_huge_size_is_too_large(repository: Path) -> None:
    blob = object_id(repository, "HEAD:a.txt")
    replace_loose(repository, blob, zlib.compress(b"blob 99999999999\0abc"))

    assert (await diff_error(repository)).code == WORKSPACE_GIT_TOO_LARGE


async def test_a_missing_object_is_a_typed_failure(repository: Path) -> None:
    loose_path(repository, object_id(repository, "HEAD:a.txt")).unlink()

    assert (await diff_error(repository)).code == WORKSPACE_GIT_FAILED


# -- packs --------------------------------------------------------------------------


async def test_a_truncated_pack_is_a_typed_failure(repository: Path) -> None:
    git(repository, "repack", "-adf", "--quiet")
    git(repository, "prune-packed")
    (pack,) = (repository / ".git" / "objects" / "pack").glob("*.pack")
    data = pack.read_bytes()
    pack.chmod(0o644)
    pack.write_bytes(data[: len(data) // 2])

    assert (await diff_error(repository)).code == WORKSPACE_GIT_FAILED


async def test_a_ref_delta_against_a_loose_base_is_read(repository: Path, tmp_path: Path) -> None:
    tree = object_id(repository, "HEAD^{tree}")
    base = object_id(repository, "HEAD:sub")  # a delta takes its base's type: a tree here
    content = raw_tree(repository, "HEAD^{tree}")
    delta = insert_delta(len(raw_tree(repository, "HEAD:sub")), content)
    loose_path(repository, tree).unlink()
    write_pack(repository, [(tree, pack_entry(REF_DELTA, len(delta), delta, base))])
    workspace = LocalWorkspace(repository)

    snapshot = await workspace.snapshot()
    await workspace.dispose()

    assert snapshot.id == f"git-tree-{reference_tree(repository, tmp_path / 'reference')}"


async def test_a_delta_loop_ends_at_the_depth_bound(repository: Path) -> None:
    tree = object_id(repository, "HEAD^{tree}")
    other = bytes(range(1, 21))
    delta = insert_delta(5, b"abcde")
    loose_path(repository, tree).unlink()
    write_pack(
        repository,
        [
            (tree, pack_entry(REF_DELTA, len(delta), delta, other)),
            (other, pack_entry(REF_DELTA, len(delta), delta, tree)),
        ],
    )

    error = await diff_error(repository)

    assert error.code == WORKSPACE_GIT_FAILED
    assert "delta chain" in error.message


async def test_a_delta_copying_outside_its_base_is_refused(repository: Path) -> None:
    tree = object_id(repository, "HEAD^{tree}")
    base = object_id(repository, "HEAD:a.txt")
    base_size = len(raw_blob(repository, "HEAD:a.txt"))
    copy_far = bytes([0x80 | 0x01 | 0x10, 0xF0, 0x20])  # copy 32 bytes from offset 240
    delta = varint(base_size) + varint(32) + copy_far
    loose_path(repository, tree).unlink()
    write_pack(repository, [(tree, pack_entry(REF_DELTA, len(delta), delta, base))])

    assert (await diff_error(repository)).code == WORKSPACE_GIT_FAILED


async def test_a_pack_entry_that_inflates_past_its_size_is_refused(repository: Path) -> None:
    blob = object_id(repository, "HEAD:a.txt")
    loose_path(repository, blob).unlink()
    write_pack(repository, [(blob, pack_entry(BLOB, 14, b"\0" * (64 * 1024 * 1024)))])

    assert (await diff_error(repository)).code == WORKSPACE_GIT_FAILED


async def test_a_pack_entry_claiming_a_huge_size_is_too_large(repository: Path) -> None:
    blob = object_id(repository, "HEAD:a.txt")
    loose_path(repository, blob).unlink()
    write_pack(repository, [(blob, pack_entry(BLOB, 1 << 40, b"one\ntwo\nthree\n"))])

    assert (await diff_error(repository)).code == WORKSPACE_GIT_TOO_LARGE


async def test_an_index_that_fails_its_checksum_is_refused(repository: Path) -> None:
    git(repository, "repack", "-adf", "--quiet")
    git(repository, "prune-packed")
    (index,) = (repository / ".git" / "objects" / "pack").glob("*.idx")
    data = bytearray(index.read_bytes())
    data[100] ^= 1
    index.chmod(0o644)
    index.write_bytes(bytes(data))

    assert (await diff_error(repository)).code == WORKSPACE_GIT_FAILED


# -- bounds, deadline and stopping --------------------------------------------------


@pytest.mark.parametrize("operation", ["diff", "snapshot"])
def test_bounds_on_entries_depth_and_size_are_typed(repository: Path, operation: str) -> None:
    deep = repository / "d"
    for _ in range(6):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "f.txt").write_text("deep\n")
    (repository / "big.txt").write_text("x" * 5000 + "\n")
    cases = [
        ReaderLimits(max_entries=3),
        ReaderLimits(max_depth=3),
        ReaderLimits(max_hashed_bytes=1000),
    ]
    if operation == "diff":
        cases.append(ReaderLimits(max_object_bytes=1000))
    for limits in cases:
        with pytest.raises(LocalWorkspaceError) as caught:
            read_directly(repository, operation, limits)
        assert caught.value.code == WORKSPACE_GIT_TOO_LARGE, limits


def test_the_deadline_is_a_typed_failure(repository: Path) -> None:
    with pytest.raises(LocalWorkspaceError) as caught:
        read_directly(repository, "snapshot", ReaderLimits(), timeout_ms=0)

    assert caught.value.code == WORKSPACE_GIT_FAILED
    assert "longer than" in caught.value.message


def test_a_costly_line_diff_falls_back_to_a_correct_replacement(repository: Path) -> None:
    lines = [f"{i % 50}\n" for i in range(3000)]
    (repository / "costly.txt").write_text("".join(lines))
    commit_all(repository)
    (repository / "costly.txt").write_text("".join(reversed(lines)))

    diff = read_directly(repository, "diff", ReaderLimits(max_diff_cost=10_000))

    assert isinstance(diff, str)
    assert "@@ -1,3000 +1,3000 @@" in diff


async def test_dispose_stops_a_diff_in_progress(repository: Path) -> None:
    lines = [f"{i % 97}\n" for i in range(6000)]
    (repository / "slow.txt").write_text("".join(lines))
    commit_all(repository)
    (repository / "slow.txt").write_text("".join(lines[i] for i in range(5999, -1, -2)) + "".join(lines[::2]))
    workspace = LocalWorkspace(repository)
    outcome: list[BaseException] = []

    async def run_diff() -> None:
        try:
            await workspace.diff()
        except LocalWorkspaceError as error:
            outcome.append(error)

    threads_before = threading.active_count()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run_diff)
        await trio.sleep(0.3)
        with trio.fail_after(10):
            await workspace.dispose()

    assert [getattr(error, "code", None) for error in outcome] == [WORKSPACE_DISPOSED]
    assert threading.active_count() <= threads_before + 1  # trio may keep one idle worker


async def test_cancelling_a_diff_stops_its_thread_and_keeps_the_workspace_usable(repository: Path) -> None:
    lines = [f"{i % 97}\n" for i in range(6000)]
    (repository / "slow.txt").write_text("".join(lines))
    commit_all(repository)
    (repository / "slow.txt").write_text("".join(lines[i] for i in range(5999, -1, -2)) + "".join(lines[::2]))
    workspace = LocalWorkspace(repository)
    try:
        with trio.move_on_after(0.3) as scope:
            await workspace.diff()
        assert scope.cancelled_caught
        (repository / "slow.txt").write_text("".join(lines))
        (repository / "a.txt").write_text("after\n")
        assert "+after\n" in await workspace.diff()
    finally:
        await workspace.dispose()
