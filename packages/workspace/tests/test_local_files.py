"""``LocalWorkspace`` file operations: caps, atomic writes, listing, lifecycle, typed errors."""

from __future__ import annotations

import copy
import errno
import os
import pickle
import stat
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

import harness_workspace
from harness_workspace import MemoryWorkspace, bind_workspace, invoke_workspace_operation
from harness_workspace.local import (
    LOCAL_WORKSPACE_ERROR_CODES,
    WORKSPACE_DISPOSED,
    WORKSPACE_INVALID_UTF8,
    WORKSPACE_IO_FAILED,
    WORKSPACE_LINKED_FILE,
    WORKSPACE_LIST_TOO_LARGE,
    WORKSPACE_NOT_A_DIRECTORY,
    WORKSPACE_NOT_FOUND,
    WORKSPACE_PATH_ESCAPES_ROOT,
    WORKSPACE_SYMLINK_REFUSED,
    WORKSPACE_TOO_LARGE,
    LocalWorkspace,
    LocalWorkspaceError,
    ResolverChoice,
)

CAP = 1024


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest) -> ResolverChoice:
    return request.param


@pytest.fixture
async def workspace(tmp_path: Path, resolver: ResolverChoice) -> AsyncIterator[LocalWorkspace]:
    ws = LocalWorkspace(tmp_path, resolver=resolver, max_file_bytes=CAP, max_list_entries=50)
    yield ws
    await ws.dispose()


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


# -- construction ------------------------------------------------------------------------


def test_auto_resolver_uses_openat2_on_this_kernel(tmp_path: Path) -> None:
    ws = LocalWorkspace(tmp_path)
    assert ws.resolver == "openat2"
    trio.run(ws.dispose)


def test_a_missing_root_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(LocalWorkspaceError) as caught:
        LocalWorkspace(tmp_path / "missing")
    assert caught.value.code == WORKSPACE_NOT_FOUND
    assert caught.value.operation is None


def test_a_file_as_root_is_a_typed_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(LocalWorkspaceError) as caught:
        LocalWorkspace(tmp_path / "f")
    assert caught.value.code == WORKSPACE_NOT_A_DIRECTORY


@pytest.mark.parametrize(
    "options",
    [{"max_file_bytes": 0}, {"max_list_entries": -1}, {"max_file_bytes": True}, {"resolver": "magic"}],
)
def test_out_of_range_options_are_refused_without_leaking_the_root(
    tmp_path: Path, options: dict[str, object]
) -> None:
    before = open_fds()
    with pytest.raises(ValueError, match=r"."):
        LocalWorkspace(tmp_path, **options)  # type: ignore[arg-type]
    assert open_fds() == before


# -- read_file ---------------------------------------------------------------------------


async def test_read_returns_the_text_up_to_and_including_the_cap(
    tmp_path: Path, workspace: LocalWorkspace
) -> None:
    (tmp_path / "exact.txt").write_bytes(b"a" * CAP)
    (tmp_path / "over.txt").write_bytes(b"a" * (CAP + 1))
    (tmp_path / "utf8.txt").write_text("héllo ✓\n", encoding="utf-8")
    assert await workspace.read_file("exact.txt") == "a" * CAP
    assert await workspace.read_file("utf8.txt") == "héllo ✓\n"
    with pytest.raises(LocalWorkspaceError) as caught:
        await workspace.read_file("over.txt")
    assert caught.value.code == WORKSPACE_TOO_LARGE


async def test_reading_a_ten_gibibyte_sparse_file_fails_fast(
    tmp_path: Path, workspace: LocalWorkspace
) -> None:
    (tmp_path / "huge").touch()
    os.truncate(tmp_path / "huge", 10 * 1024**3)
    started = time.monotonic()
    with pytest.raises(LocalWorkspaceError) as caught:
        await workspace.read_file("huge")
    assert caught.value.code == WORKSPACE_TOO_LARGE
    assert time.monotonic() - started < 2


async def test_the_cap_is_enforced_while_reading_when_the_size_lies(
    tmp_path: Path, workspace: LocalWorkspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A file that grows after fstat (or a /proc file reporting size 0): the read loop
    # must stop at cap + 1 bytes, never read the whole file.
    (tmp_path / "huge").touch()
    os.truncate(tmp_path / "huge", 10 * 1024**3)
    real_fstat, real_read = os.fstat, os.read
    consumed = 0

    def lying_fstat(fd: int) -> os.stat_result:
        info = real_fstat(fd)
        return os.stat_result(
            (info.st_mode, info.st_ino, info.st_dev, info.st_nlink, info.st_uid, info.st_gid, 0, 0, 0, 0)
        )

    def counting_read(fd: int, size: int) -> bytes:
        nonlocal consumed
        data = real_read(fd, size)
        consumed += len(data)
        return data

    monkeypatch.setattr(os, "fstat", lying_fstat)
    monkeypatch.setattr(os, "read", counting_read)
    with pytest.raises(LocalWorkspaceError) as caught:
        await workspace.read_file("huge")
    assert caught.value.code == WORKSPACE_TOO_LARGE
    assert consumed == CAP + 1


async def test_proc_files_that_report_size_zero_are_capped_while_reading(resolver: ResolverChoice) -> None:
    ws = LocalWorkspace("/proc/self", resolver=resolver, max_file_bytes=16)
    try:
        with pytest.raises(LocalWorkspaceError) as caught:
            await ws.read_file("status")
        assert caught.value.code == WORKSPACE_TOO_LARGE
    finally:
        await ws.dispose()


async def test_invalid_utf8_is_a_typed_error(tmp_path: Path, workspace: LocalWorkspace) -> None:
    (tmp_path / "bad.txt").write_bytes(b"ok \xff\xfe")
    with pytest.raises(LocalWorkspaceError) as caught:
        await workspace.read_file("bad.txt")
    assert caught.value.code == WORKSPACE_INVALID_UTF8
    assert isinstance(caught.value.__cause__, UnicodeDecodeError)


async def test_reading_a_fifo_does_not_block(tmp_path: Path, workspace: LocalWorkspace) -> None:
    os.mkfifo(tmp_path / "pipe")
    with trio.fail_after(2), pytest.raises(LocalWorkspaceError):
        await workspace.read_file("pipe")


# -- write_file --------------------------------------------------------------------------


async def test_write_creates_and_replaces_a_file_keeping_its_mode(
    tmp_path: Path, workspace: LocalWorkspace
) -> None:
    await workspace.write_file("new.txt", "one\n")
    assert (tmp_path / "new.txt").read_text() == "one\n"
    os.chmod(tmp_path / "new.txt", 0o600)
    await workspace.write_file("new.txt", "two ✓\n")
    assert (tmp_path / "new.txt").read_text(encoding="utf-8") == "two ✓\n"
    assert stat.S_IMODE(os.stat(tmp_path / "new.txt").st_mode) == 0o600
    assert sorted(os.listdir(tmp_path)) == ["new.txt"], "a temporary file was left behind"


async def test_write_does_not_create_parent_directories(tmp_path: Path, workspace: LocalWorkspace) -> None:
    with pytest.raises(LocalWorkspaceError) as caught:
        await workspace.write_file("missing/new.txt", "x")
    assert caught.value.code == WORKSPACE_NOT_FOUND
    assert os.listdir(tmp_path) == []


async def test_write_refuses_a_hard_linked_target(tmp_path: Path, workspace: LocalWorkspace) -> None:
    (tmp_path / "a.txt").write_text("original")
    os.link(tmp_path / "a.txt", tmp_path / "b.txt")
    with pytest.raises(LocalWorkspaceError) as caught:
        await workspace.write_file("a.txt", "changed")
    assert caught.value.code == WORKSPACE_LINKED_FILE
    assert (tmp_path / "a.txt").read_text() == (tmp_path / "b.txt").read_text() == "original"


async def test_write_refuses_a_symlink_target_even_inside_the_root(
    tmp_path: Path, workspace: LocalWorkspace
) -> None:
    (tmp_path / "real.txt").write_text("original")
    (tmp_path / "alias.txt").symlink_to("real.txt")
    with pytest.raises(LocalWorkspaceError) as caught:
        await workspace.write_file("alias.txt", "changed")
    assert caught.value.code == WORKSPACE_SYMLINK_REFUSED
    assert (tmp_path / "real.txt").read_text() == "original"
    assert (tmp_path / "alias.txt").is_symlink()


async def test_write_caps_contents_by_encoded_size(tmp_path: Path, workspace: LocalWorkspace) -> None:
    for contents in ("a" * (CAP + 1), "é" * (CAP // 2 + 1)):
        with pytest.raises(LocalWorkspaceError) as caught:
            await workspace.write_file("big.txt", contents)
        assert caught.value.code == WORKSPACE_TOO_LARGE
    await workspace.write_file("exact.txt", "é" * (CAP // 2))
    assert os.listdir(tmp_path) == ["exact.txt"]


async def test_write_refuses_lone_surrogates(tmp_path: Path, workspace: LocalWorkspace) -> None:
    with pytest.raises(LocalWorkspaceError) as caught:
        await workspace.write_file("x.txt", "bad \ud800")
    assert caught.value.code == WORKSPACE_INVALID_UTF8
    assert os.listdir(tmp_path) == []


async def test_a_failed_write_removes_its_temporary_file_and_keeps_the_original(
    tmp_path: Path, workspace: LocalWorkspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.txt").write_text("original")

    def failing_fsync(fd: int) -> None:
        raise OSError(errno.EIO, "simulated I/O error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(LocalWorkspaceError) as caught:
        await workspace.write_file("a.txt", "changed")
    assert caught.value.code == WORKSPACE_IO_FAILED
    assert os.listdir(tmp_path) == ["a.txt"]
    assert (tmp_path / "a.txt").read_text() == "original"


async def test_readers_never_see_a_partial_write(tmp_path: Path, resolver: ResolverChoice) -> None:
    size = 256 * 1024
    versions = ("a" * size, "b" * size)
    (tmp_path / "f.txt").write_text(versions[0])
    ws = LocalWorkspace(tmp_path, resolver=resolver)
    stop = threading.Event()
    torn: list[int] = []
    reads = 0

    def reader() -> None:
        nonlocal reads
        while not stop.is_set():
            with open(tmp_path / "f.txt") as handle:
                text = handle.read()
            reads += 1
            if text not in versions:
                torn.append(len(text))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for index in range(40):
            await ws.write_file("f.txt", versions[index % 2])
    finally:
        stop.set()
        thread.join()
        await ws.dispose()
    assert reads > 0
    assert torn == []


# -- list_files --------------------------------------------------------------------------

TREE = {
    "README.md": "# demo\n",
    "src/app.py": "print('app')\n",
    "src/lib/util.py": "x = 1\n",
    "src2/x.py": "other\n",
    "srcfile": "not a directory\n",
}


async def test_listing_agrees_with_the_memory_fake(tmp_path: Path, workspace: LocalWorkspace) -> None:
    for name, text in TREE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    (tmp_path / "empty").mkdir()
    memory = MemoryWorkspace(TREE)
    # The fake takes paths as plain keys; give it the normalised spelling of the last one.
    for path, key in [(p, p) for p in ("", ".", "/", "src", "src/", "src/lib", "srcfile", "src/app.py")] + [
        ("./src/../src2", "src2")
    ]:
        assert await workspace.list_files(path) == await memory.list_files(key), path


async def test_listing_names_links_and_special_files_without_following(
    tmp_path: Path, workspace: LocalWorkspace
) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "link").symlink_to("/etc")
    os.mkfifo(tmp_path / "d" / "pipe")
    assert await workspace.list_files("d") == ["d/link", "d/pipe"]


async def test_listing_past_the_bound_is_an_error_not_a_truncation(
    tmp_path: Path, workspace: LocalWorkspace
) -> None:
    for index in range(50):
        (tmp_path / f"f{index:02}").write_text("")
    assert len(await workspace.list_files("")) == 50
    (tmp_path / "one-more").write_text("")
    with pytest.raises(LocalWorkspaceError) as caught:
        await workspace.list_files("")
    assert caught.value.code == WORKSPACE_LIST_TOO_LARGE


async def test_listing_a_tree_deeper_than_the_bound_is_refused(
    tmp_path: Path, resolver: ResolverChoice
) -> None:
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(130):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)
    ws = LocalWorkspace(tmp_path, resolver=resolver)
    try:
        with pytest.raises(LocalWorkspaceError) as caught:
            await ws.list_files("")
        assert caught.value.code == WORKSPACE_LIST_TOO_LARGE
    finally:
        await ws.dispose()


# -- lifecycle ---------------------------------------------------------------------------


async def test_dispose_is_idempotent_and_every_operation_afterwards_fails(
    tmp_path: Path, resolver: ResolverChoice
) -> None:
    before = open_fds()
    ws = LocalWorkspace(tmp_path, resolver=resolver)
    await ws.dispose()
    await ws.dispose()
    assert ws.disposed
    assert open_fds() == before, "the root descriptor was not closed"
    attempts = [
        ws.read_file("a"),
        ws.write_file("a", "x"),
        ws.list_files(""),
        ws.execute(harness_workspace.CommandRequest(argv=("true",))),
        ws.diff(),
        ws.snapshot(),
    ]
    for attempt in attempts:
        with pytest.raises(LocalWorkspaceError) as caught:
            await attempt
        assert caught.value.code == WORKSPACE_DISPOSED
    assert os.listdir(tmp_path) == []


async def test_dispose_racing_in_flight_reads_never_closes_the_root_under_them(
    tmp_path: Path, resolver: ResolverChoice
) -> None:
    (tmp_path / "f.txt").write_text("x" * 100_000)
    before = open_fds()
    for _ in range(20):
        ws = LocalWorkspace(tmp_path, resolver=resolver)
        outcomes: list[str] = []

        async def read_once(ws: LocalWorkspace = ws, outcomes: list[str] = outcomes) -> None:
            try:
                outcomes.append(await ws.read_file("f.txt"))
            except LocalWorkspaceError as error:
                outcomes.append(error.code)

        async with trio.open_nursery() as nursery:
            for _ in range(8):
                nursery.start_soon(read_once)
            await trio.lowlevel.checkpoint()
            nursery.start_soon(ws.dispose)
        assert all(outcome in {"x" * 100_000, WORKSPACE_DISPOSED} for outcome in outcomes), {
            outcome[:40] for outcome in outcomes
        }
    assert open_fds() == before


# -- errors and the dispatcher ------------------------------------------------------------


def test_every_error_code_pickles_and_copies_intact() -> None:
    assert issubclass(LocalWorkspaceError, harness_workspace.WorkspaceOperationError)
    assert harness_workspace.LocalWorkspaceError is LocalWorkspaceError
    for code in sorted(LOCAL_WORKSPACE_ERROR_CODES):
        error = LocalWorkspaceError(code, f"message for {code}", "read_file")
        for clone in (pickle.loads(pickle.dumps(error)), copy.copy(error), copy.deepcopy(error)):
            assert type(clone) is LocalWorkspaceError
            assert (clone.code, clone.message, clone.operation) == (code, f"message for {code}", "read_file")


async def test_a_raised_error_pickles_with_its_code(tmp_path: Path, workspace: LocalWorkspace) -> None:
    with pytest.raises(LocalWorkspaceError) as caught:
        await workspace.read_file("../x")
    clone = pickle.loads(pickle.dumps(caught.value))
    assert (clone.code, clone.operation) == (WORKSPACE_PATH_ESCAPES_ROOT, "read_file")


async def test_operations_work_through_the_dispatcher(tmp_path: Path, workspace: LocalWorkspace) -> None:
    ws = bind_workspace(workspace)
    assert (
        await invoke_workspace_operation(ws, {"operation": "write_file", "path": "a.txt", "contents": "hi"})
        is None
    )
    assert await invoke_workspace_operation(ws, {"operation": "read_file", "path": "a.txt"}) == "hi"
    assert await invoke_workspace_operation(ws, {"operation": "list_files", "path": "."}) == ["a.txt"]
    with pytest.raises(LocalWorkspaceError) as caught:
        await invoke_workspace_operation(ws, {"operation": "read_file", "path": "../../etc/passwd"})
    assert caught.value.code == WORKSPACE_PATH_ESCAPES_ROOT
    with pytest.raises(LocalWorkspaceError) as caught:
        await invoke_workspace_operation(ws, {"operation": "write_file", "path": "/tmp/x", "contents": "x"})
    assert caught.value.operation == "write_file"
    assert await invoke_workspace_operation(ws, {"operation": "dispose"}) is None
    with pytest.raises(LocalWorkspaceError) as caught:
        await invoke_workspace_operation(ws, {"operation": "read_file", "path": "a.txt"})
    assert caught.value.code == WORKSPACE_DISPOSED
