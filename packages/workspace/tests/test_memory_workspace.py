"""``MemoryWorkspace``: the public in-memory fake adapter (spec §5 and §7)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from types import MappingProxyType

import pytest
import trio

from harness_workspace import (
    WORKSPACE_CAPABILITIES,
    WORKSPACE_OPERATION_UNSUPPORTED,
    CommandHandler,
    CommandRequest,
    CommandResult,
    MemoryWorkspace,
    Workspace,
    WorkspaceOperationMalformedError,
    WorkspaceOperationUnsupportedError,
    WorkspaceSnapshot,
    invoke_workspace_operation,
)

FIXED_TIME = "2026-01-01T00:00:00Z"

TREE = {
    "README.md": "# demo\n",
    "src/app.py": "print('app')\n",
    "src/lib/util.py": "x = 1\n",
    "src2/x.py": "other\n",
    "srcfile": "not a directory\n",
}


def fixed_clock() -> str:
    return FIXED_TIME


def tree() -> MemoryWorkspace:
    return MemoryWorkspace(TREE, clock=fixed_clock)


def call_operation(workspace: Workspace, operation: str) -> Awaitable[object]:
    """Start ``operation`` with well-formed arguments (not yet awaited)."""
    if operation == "read_file":
        return workspace.read_file("README.md")
    if operation == "write_file":
        return workspace.write_file("new.txt", "new")
    if operation == "list_files":
        return workspace.list_files("")
    if operation == "execute":
        return workspace.execute(CommandRequest(argv=("true",)))
    if operation == "diff":
        return workspace.diff()
    if operation == "snapshot":
        return workspace.snapshot()
    assert operation == "dispose"
    return workspace.dispose()


def ok(stdout: str) -> CommandResult:
    return CommandResult(exit_code=0, stdout=stdout, stderr="")


# ------------------------------------------------------------------ files


async def test_read_file_returns_the_initial_contents() -> None:
    workspace = tree()
    assert await workspace.read_file("README.md") == "# demo\n"
    assert await workspace.read_file("src/lib/util.py") == "x = 1\n"


async def test_reading_a_missing_file_raises_file_not_found() -> None:
    workspace = tree()
    with pytest.raises(FileNotFoundError):
        await workspace.read_file("missing.txt")


async def test_a_directory_prefix_is_not_a_readable_file() -> None:
    with pytest.raises(FileNotFoundError):
        await tree().read_file("src")


async def test_a_workspace_without_files_starts_empty() -> None:
    workspace = MemoryWorkspace()
    assert workspace.files == {}
    assert await workspace.list_files("") == []
    with pytest.raises(FileNotFoundError):
        await workspace.read_file("README.md")


async def test_write_file_creates_a_file_that_can_be_read_back() -> None:
    workspace = tree()
    assert await workspace.write_file("docs/guide.md", "# guide\n") is None
    assert await workspace.read_file("docs/guide.md") == "# guide\n"


async def test_write_file_replaces_an_existing_file() -> None:
    workspace = tree()
    await workspace.write_file("README.md", "")
    assert await workspace.read_file("README.md") == ""


async def test_the_initial_mapping_is_copied() -> None:
    initial = {"a.txt": "one"}
    workspace = MemoryWorkspace(initial)
    initial["a.txt"] = "changed outside"
    initial["b.txt"] = "added outside"
    assert await workspace.read_file("a.txt") == "one"
    assert workspace.files == {"a.txt": "one"}


async def test_writing_does_not_change_the_callers_initial_mapping() -> None:
    initial = {"a.txt": "one"}
    workspace = MemoryWorkspace(initial)
    await workspace.write_file("a.txt", "two")
    assert initial == {"a.txt": "one"}


async def test_the_files_property_is_a_copy_of_the_current_files() -> None:
    workspace = tree()
    files = workspace.files
    assert files == TREE
    files["README.md"] = "tampered"
    assert await workspace.read_file("README.md") == "# demo\n"


# ------------------------------------------------------------------ list_files


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param("src", ["src/app.py", "src/lib/util.py"], id="directory"),
        pytest.param("src/", ["src/app.py", "src/lib/util.py"], id="directory-with-separator"),
        pytest.param("src/lib", ["src/lib/util.py"], id="nested-directory"),
        pytest.param("src2", ["src2/x.py"], id="sibling-with-shared-prefix"),
        pytest.param("src/app.py", ["src/app.py"], id="a-file-lists-itself"),
        pytest.param("sr", [], id="partial-name"),
        pytest.param("missing", [], id="missing-directory"),
    ],
)
async def test_list_files_lists_the_files_at_or_below_a_directory(path: str, expected: list[str]) -> None:
    assert await tree().list_files(path) == expected


@pytest.mark.parametrize("path", ["", ".", "/"], ids=["empty", "dot", "slash"])
async def test_list_files_of_the_root_lists_every_file_sorted(path: str) -> None:
    assert await tree().list_files(path) == sorted(TREE)


async def test_list_files_of_src_does_not_list_src2_or_srcfile() -> None:
    listed = await tree().list_files("src")
    assert "src2/x.py" not in listed
    assert "srcfile" not in listed


async def test_list_files_sees_written_files_in_sorted_order() -> None:
    workspace = MemoryWorkspace({"b/2.txt": "", "b/1.txt": ""})
    await workspace.write_file("b/0.txt", "")
    assert await workspace.list_files("b") == ["b/0.txt", "b/1.txt", "b/2.txt"]


# ------------------------------------------------------------------ execute


async def test_an_unknown_program_exits_with_127() -> None:
    result = await tree().execute(CommandRequest(argv=("make", "test")))
    assert result == CommandResult(exit_code=127, stdout="", stderr="make: not available\n")


async def test_a_synchronous_handler_answers_its_program() -> None:
    received: list[CommandRequest] = []

    def echo(command: CommandRequest) -> CommandResult:
        received.append(command)
        return ok(" ".join(command.argv[1:]) + "\n")

    workspace = MemoryWorkspace(commands={"echo": echo})
    command = CommandRequest(argv=("echo", "hello", "world"), cwd="src", timeout_ms=5)
    assert await workspace.execute(command) == ok("hello world\n")
    assert received == [command]


async def test_an_async_handler_answers_its_program() -> None:
    async def slow_echo(command: CommandRequest) -> CommandResult:
        await trio.lowlevel.checkpoint()
        return ok(command.argv[1])

    workspace = MemoryWorkspace(commands={"echo": slow_echo})
    assert await workspace.execute(CommandRequest(argv=("echo", "async"))) == ok("async")


async def test_handlers_are_keyed_by_the_program_name_only() -> None:
    handlers: dict[str, CommandHandler] = {
        "git": lambda command: ok("git " + command.argv[1]),
        "make": lambda command: ok("make"),
    }
    workspace = MemoryWorkspace(commands=handlers)
    assert await workspace.execute(CommandRequest(argv=("git", "status"))) == ok("git status")
    assert await workspace.execute(CommandRequest(argv=("make",))) == ok("make")
    result = await workspace.execute(CommandRequest(argv=("/usr/bin/git", "status")))
    assert result.exit_code == 127


async def test_a_handler_exception_propagates_from_execute() -> None:
    def failing(command: CommandRequest) -> CommandResult:
        raise OSError("handler failed")

    workspace = MemoryWorkspace(commands={"boom": failing})
    with pytest.raises(OSError, match="handler failed"):
        await workspace.execute(CommandRequest(argv=("boom",)))


async def test_the_commands_mapping_is_copied() -> None:
    handlers: dict[str, CommandHandler] = {}
    workspace = MemoryWorkspace(commands=handlers)
    handlers["late"] = lambda command: ok("late")
    assert (await workspace.execute(CommandRequest(argv=("late",)))).exit_code == 127


# ------------------------------------------------------------------ diff


async def test_an_unchanged_workspace_has_an_empty_diff() -> None:
    assert await tree().diff() == ""


async def test_writing_the_same_contents_back_leaves_the_diff_empty() -> None:
    workspace = tree()
    await workspace.write_file("README.md", "changed\n")
    await workspace.write_file("README.md", "# demo\n")
    assert await workspace.diff() == ""


async def test_the_diff_shows_a_changed_file_as_a_unified_diff() -> None:
    workspace = MemoryWorkspace({"a.txt": "one\ntwo\n"})
    await workspace.write_file("a.txt", "one\nzwei\n")
    assert await workspace.diff() == ("--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+zwei\n")


async def test_the_diff_shows_an_added_file_against_dev_null() -> None:
    workspace = MemoryWorkspace({"a.txt": "one\n"})
    await workspace.write_file("new.txt", "fresh\n")
    assert await workspace.diff() == "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+fresh\n"


async def test_the_diff_lists_changed_files_in_path_order() -> None:
    workspace = MemoryWorkspace({"b.txt": "b\n", "d.txt": "d\n"})
    await workspace.write_file("d.txt", "D\n")
    await workspace.write_file("a.txt", "a\n")
    await workspace.write_file("c.txt", "c\n")
    assert await workspace.diff() == (
        "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+a\n"
        "--- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n+c\n"
        "--- a/d.txt\n+++ b/d.txt\n@@ -1 +1 @@\n-d\n+D\n"
    )


async def test_the_diff_is_against_the_initial_files_not_the_previous_write() -> None:
    workspace = MemoryWorkspace({"a.txt": "v1\n"})
    await workspace.write_file("a.txt", "v2\n")
    await workspace.write_file("a.txt", "v3\n")
    assert await workspace.diff() == "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-v1\n+v3\n"


# ------------------------------------------------------------------ snapshot


async def test_a_snapshot_is_stable_while_the_contents_do_not_change() -> None:
    workspace = tree()
    first = await workspace.snapshot()
    await workspace.read_file("README.md")
    await workspace.list_files("")
    second = await workspace.snapshot()
    assert first.id == second.id
    assert first.id


async def test_the_snapshot_id_changes_with_the_contents() -> None:
    workspace = tree()
    before = await workspace.snapshot()
    await workspace.write_file("README.md", "# changed\n")
    after = await workspace.snapshot()
    assert after.id != before.id


async def test_the_snapshot_id_changes_when_a_file_is_added_with_empty_contents() -> None:
    workspace = tree()
    before = await workspace.snapshot()
    await workspace.write_file("empty.txt", "")
    assert (await workspace.snapshot()).id != before.id


async def test_the_snapshot_id_returns_when_the_contents_return() -> None:
    workspace = tree()
    before = await workspace.snapshot()
    await workspace.write_file("README.md", "# changed\n")
    await workspace.write_file("README.md", "# demo\n")
    assert (await workspace.snapshot()).id == before.id


async def test_workspaces_with_equal_files_have_equal_snapshot_ids() -> None:
    assert (await tree().snapshot()).id == (await MemoryWorkspace(dict(TREE)).snapshot()).id


async def test_moving_contents_between_names_changes_the_snapshot_id() -> None:
    first = await MemoryWorkspace({"a": "bc", "ab": "c"}).snapshot()
    second = await MemoryWorkspace({"a": "b", "ab": "cc"}).snapshot()
    third = await MemoryWorkspace({"ab": "bc", "a": "c"}).snapshot()
    assert len({first.id, second.id, third.id}) == 3


async def test_snapshot_metadata_counts_files_and_utf8_bytes() -> None:
    workspace = MemoryWorkspace({"a.txt": "abc", "b.txt": "é€"}, clock=fixed_clock)
    snapshot = await workspace.snapshot()
    assert type(snapshot) is WorkspaceSnapshot
    assert snapshot.metadata == {"files": 2, "bytes": 3 + 2 + 3}


async def test_snapshot_metadata_of_an_empty_workspace_counts_zero() -> None:
    snapshot = await MemoryWorkspace().snapshot()
    assert snapshot.metadata == {"files": 0, "bytes": 0}


async def test_snapshot_created_at_comes_from_the_clock() -> None:
    stamps = iter(["t1", "t2"])
    workspace = MemoryWorkspace(clock=lambda: next(stamps))
    assert (await workspace.snapshot()).created_at == "t1"
    assert (await workspace.snapshot()).created_at == "t2"


async def test_the_default_clock_gives_a_utc_iso_timestamp() -> None:
    created_at = (await MemoryWorkspace().snapshot()).created_at
    parsed = datetime.fromisoformat(created_at)
    assert parsed.utcoffset() == timedelta(0)


# ------------------------------------------------------------------ calls


async def test_calls_records_every_operation_with_its_arguments_in_order() -> None:
    workspace = tree()
    command = CommandRequest(argv=("true",))
    await workspace.read_file("README.md")
    with pytest.raises(FileNotFoundError):
        await workspace.read_file("missing")
    await workspace.write_file("a.txt", "A")
    await workspace.list_files("src")
    await workspace.execute(command)
    await workspace.diff()
    await workspace.snapshot()
    await workspace.dispose()
    assert workspace.calls == [
        ("read_file", ("README.md",)),
        ("read_file", ("missing",)),
        ("write_file", ("a.txt", "A")),
        ("list_files", ("src",)),
        ("execute", (command,)),
        ("diff", ()),
        ("snapshot", ()),
        ("dispose", ()),
    ]


def test_a_new_workspace_has_recorded_no_calls() -> None:
    assert tree().calls == []


# ------------------------------------------------------------------ dispose


async def test_dispose_marks_the_workspace_disposed_and_drops_its_files() -> None:
    workspace = tree()
    assert workspace.disposed is False
    assert await workspace.dispose() is None
    assert workspace.disposed is True
    assert workspace.files == {}


async def test_dispose_is_idempotent() -> None:
    workspace = tree()
    await workspace.dispose()
    assert await workspace.dispose() is None
    assert workspace.disposed is True
    assert workspace.calls == [("dispose", ()), ("dispose", ())]


@pytest.mark.parametrize("operation", [op for op in WORKSPACE_CAPABILITIES if op != "dispose"])
async def test_after_dispose_every_other_operation_raises_unsupported(operation: str) -> None:
    workspace = tree()
    await workspace.dispose()
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        await call_operation(workspace, operation)
    assert caught.value.code == WORKSPACE_OPERATION_UNSUPPORTED
    assert caught.value.operation == operation


async def test_a_write_after_dispose_does_not_bring_files_back() -> None:
    workspace = tree()
    await workspace.dispose()
    with pytest.raises(WorkspaceOperationUnsupportedError):
        await workspace.write_file("a.txt", "A")
    assert workspace.files == {}


# ------------------------------------------------------------------ through the dispatcher


async def test_read_file_passes_through_the_dispatcher() -> None:
    workspace = tree()
    assert await invoke_workspace_operation(workspace, {"operation": "read_file", "path": "README.md"}) == (
        "# demo\n"
    )


async def test_write_file_passes_through_the_dispatcher() -> None:
    workspace = tree()
    request = {"operation": "write_file", "path": "a.txt", "contents": "A"}
    assert await invoke_workspace_operation(workspace, request) is None
    assert workspace.files["a.txt"] == "A"


async def test_list_files_passes_through_the_dispatcher() -> None:
    workspace = tree()
    listed = await invoke_workspace_operation(workspace, {"operation": "list_files", "path": "src"})
    assert listed == ["src/app.py", "src/lib/util.py"]


async def test_execute_passes_through_the_dispatcher_with_a_fresh_command() -> None:
    received: list[CommandRequest] = []

    def record(command: CommandRequest) -> CommandResult:
        received.append(command)
        return ok("done")

    workspace = MemoryWorkspace(commands={"make": record})
    result = await invoke_workspace_operation(
        workspace, {"operation": "execute", "command": {"argv": ["make", "all"], "timeout_ms": 0}}
    )
    assert result == ok("done")
    [command] = received
    assert type(command) is CommandRequest
    assert command.argv == ("make", "all")
    assert command.timeout_ms == 0


async def test_execute_of_an_unknown_program_passes_through_the_dispatcher() -> None:
    result = await invoke_workspace_operation(
        tree(), {"operation": "execute", "command": CommandRequest(argv=("cargo", "build"))}
    )
    assert result == CommandResult(exit_code=127, stdout="", stderr="cargo: not available\n")


async def test_diff_passes_through_the_dispatcher() -> None:
    workspace = MemoryWorkspace({"a.txt": "one\n"})
    await workspace.write_file("a.txt", "two\n")
    assert await invoke_workspace_operation(workspace, {"operation": "diff"}) == (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n"
    )


async def test_snapshot_passes_through_the_dispatcher_with_read_only_metadata() -> None:
    workspace = tree()
    direct = await workspace.snapshot()
    through = await invoke_workspace_operation(workspace, {"operation": "snapshot"})
    assert type(through) is WorkspaceSnapshot
    assert through.id == direct.id
    assert through.created_at == FIXED_TIME
    assert through.metadata == direct.metadata
    assert type(through.metadata) is MappingProxyType


async def test_dispose_passes_through_the_dispatcher() -> None:
    workspace = tree()
    assert await invoke_workspace_operation(workspace, {"operation": "dispose"}) is None
    assert workspace.disposed


async def test_the_dispatcher_propagates_the_missing_file_error_unchanged() -> None:
    with pytest.raises(FileNotFoundError):
        await invoke_workspace_operation(tree(), {"operation": "read_file", "path": "missing"})


async def test_the_dispatcher_propagates_the_disposed_error_unchanged() -> None:
    workspace = tree()
    await workspace.dispose()
    with pytest.raises(WorkspaceOperationUnsupportedError) as caught:
        await invoke_workspace_operation(workspace, {"operation": "diff"})
    assert caught.value.operation == "diff"


async def test_a_rejected_request_never_reaches_the_memory_workspace() -> None:
    workspace = tree()
    with pytest.raises(WorkspaceOperationMalformedError) as caught:
        await invoke_workspace_operation(workspace, {"operation": "read_file", "path": ""})
    assert str(caught.value) == "read_file.path must be a nonempty string"
    assert workspace.calls == []


CALL_THROUGH_DISPATCHER: dict[str, Callable[[MemoryWorkspace], Awaitable[object]]] = {
    "read_file": lambda ws: invoke_workspace_operation(ws, {"operation": "read_file", "path": "README.md"}),
    "write_file": lambda ws: invoke_workspace_operation(
        ws, {"operation": "write_file", "path": "n.txt", "contents": "n"}
    ),
    "list_files": lambda ws: invoke_workspace_operation(ws, {"operation": "list_files", "path": "."}),
    "execute": lambda ws: invoke_workspace_operation(
        ws, {"operation": "execute", "command": {"argv": ["true"]}}
    ),
    "diff": lambda ws: invoke_workspace_operation(ws, {"operation": "diff"}),
    "snapshot": lambda ws: invoke_workspace_operation(ws, {"operation": "snapshot"}),
    "dispose": lambda ws: invoke_workspace_operation(ws, {"operation": "dispose"}),
}


@pytest.mark.parametrize("operation", WORKSPACE_CAPABILITIES)
async def test_each_operation_through_the_dispatcher_is_recorded_once(operation: str) -> None:
    workspace = tree()
    await CALL_THROUGH_DISPATCHER[operation](workspace)
    assert [name for name, _ in workspace.calls] == [operation]
