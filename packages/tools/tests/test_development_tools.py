"""The five development tools at their own boundary: arguments, intents, results, bounds.

The runtime's path (intent → policy → permission → effect, durably) is tested in the kernel
(test_development_tools_runtime.py); here each tool is converted as the gate converts
(``msgspec.convert(..., strict=True)``) and executed with a one-operation view.
"""

from __future__ import annotations

import shlex
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness_tools import (
    DEVELOPMENT_RESULT_MAX_BYTES,
    DEVELOPMENT_TOOL_NAMES,
    READ_MAX_LINES,
    WRITE_MAX_BYTES,
    Tool,
    ToolExecutionContext,
    WorkspaceBoundary,
    WorkspaceFileAccessError,
    create_development_tools,
    get_tool_execution_boundary,
    is_effect_tool,
)
from harness_tools._dev_tools import shell_join
from harness_workspace import (
    AbortController,
    CommandRequest,
    CommandResult,
    MemoryWorkspace,
    WorkspaceOperationUnsupportedError,
    restrict_workspace,
)

TOOLS = {tool.name: tool for tool in create_development_tools("/repo")}


def convert(name: str, arguments: object) -> object:
    return msgspec.convert(arguments, TOOLS[name].parameters, strict=True)


async def call(name: str, arguments: object, workspace: Any, signal: Any = None) -> Any:
    tool = TOOLS[name]
    boundary = get_tool_execution_boundary(tool)
    assert isinstance(boundary, WorkspaceBoundary)
    view = restrict_workspace(workspace, boundary.capability)
    context = ToolExecutionContext(signal=signal, workspace=view, session_id="s", task_id=None, call_id="c")
    return await tool.execute(convert(name, arguments), context)


def json_size(value: object) -> int:
    return len(msgspec.json.encode(value))


# ------------------------------------------------------------------ the set


def test_five_tools_in_order_each_bound_to_one_operation_with_its_access() -> None:
    tools = create_development_tools("/srv/checkout")
    assert tuple(tool.name for tool in tools) == DEVELOPMENT_TOOL_NAMES
    bound = [get_tool_execution_boundary(tool) for tool in tools]
    assert bound == [
        WorkspaceBoundary(capability="read_file", root="/srv/checkout"),
        WorkspaceBoundary(capability="list_files", root="/srv/checkout"),
        WorkspaceBoundary(capability="write_file", root="/srv/checkout", access="write"),
        WorkspaceBoundary(capability="execute", root="/srv/checkout", access="execute"),
        WorkspaceBoundary(capability="diff", root="/srv/checkout"),
    ]
    assert [is_effect_tool(tool) for tool in tools] == [False, False, True, True, False]


@pytest.mark.parametrize("root", ["", None, 3])
def test_a_root_is_required(root: object) -> None:
    with pytest.raises(WorkspaceFileAccessError) as caught:
        create_development_tools(root)  # type: ignore[arg-type]
    assert caught.value.code == "TOOL_WORKSPACE_INVALID_ROOT"


def test_schemas_are_strict_and_camel_case() -> None:
    schemas = {name: tool.input_schema for name, tool in TOOLS.items()}
    for schema in schemas.values():
        assert schema is not None
        assert schema["additionalProperties"] is False
    assert set(schemas["fs.read"]["properties"]) == {"path", "startLine", "maxLines"}  # type: ignore[index,arg-type]
    assert set(schemas["process.exec"]["properties"]) == {"argv", "cwd", "timeoutMs"}  # type: ignore[index,arg-type]
    assert schemas["git.diff"]["properties"] == {}  # type: ignore[index]


# ------------------------------------------------------------------ hostile arguments


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("fs.read", {"path": "/etc/passwd"}),
        ("fs.read", {"path": "../secret"}),
        ("fs.read", {"path": "a/../../b"}),
        ("fs.read", {"path": "a\x00b"}),
        ("fs.read", {"path": ""}),
        ("fs.read", {"path": "a" * 4_097}),
        ("fs.read", {"path": "a.txt", "startLine": 0}),
        ("fs.read", {"path": "a.txt", "startLine": 1.0}),
        ("fs.read", {"path": "a.txt", "startLine": "2"}),
        ("fs.read", {"path": "a.txt", "startLine": True}),
        ("fs.read", {"path": "a.txt", "startLine": None}),
        ("fs.read", {"path": "a.txt", "maxLines": 401}),
        ("fs.read", {"path": "a.txt", "extra": 1}),
        ("fs.list", {"path": "/"}),
        ("fs.list", {}),
        ("fs.write", {"path": "a.txt"}),
        ("fs.write", {"path": "a.txt", "contents": "x" * (WRITE_MAX_BYTES + 1)}),
        ("fs.write", {"path": "a.txt", "contents": "é" * (WRITE_MAX_BYTES // 2 + 1)}),
        ("fs.write", {"path": "../a.txt", "contents": "x"}),
        ("fs.write", {"path": "a.txt", "contents": "x", "mode": "append"}),
        ("process.exec", {"argv": []}),
        ("process.exec", {"argv": ["x"] * 129}),
        ("process.exec", {"argv": ["echo", "a" * 8_193]}),
        ("process.exec", {"argv": ["echo", "a\x00b"]}),
        ("process.exec", {"argv": [""]}),
        ("process.exec", {"argv": "echo hi"}),
        ("process.exec", {"argv": ["echo", 1]}),
        ("process.exec", {"argv": ["true"], "timeoutMs": 0}),
        ("process.exec", {"argv": ["true"], "timeoutMs": 30_001}),
        ("process.exec", {"argv": ["true"], "timeoutMs": 1000.0}),
        ("process.exec", {"argv": ["true"], "timeoutMs": "1000"}),
        ("process.exec", {"argv": ["true"], "cwd": "/tmp"}),
        ("process.exec", {"argv": ["true"], "cwd": "../up"}),
        ("process.exec", {"argv": ["true"], "env": {"A": "b"}}),
        ("git.diff", {"path": "a"}),
    ],
)
def test_hostile_arguments_are_refused_at_conversion(name: str, arguments: object) -> None:
    with pytest.raises(msgspec.ValidationError):
        convert(name, arguments)


def test_the_limits_themselves_are_accepted() -> None:
    longest = "a" * 15 + ("/" + "a" * 15) * 255 + "b"  # 4,096 characters, short segments
    assert len(longest) == 4_096
    convert("fs.read", {"path": longest, "startLine": 1, "maxLines": READ_MAX_LINES})
    convert("fs.write", {"path": "a.txt", "contents": "x" * WRITE_MAX_BYTES})
    convert("process.exec", {"argv": ["a" * 8_192] * 128, "timeoutMs": 30_000, "cwd": "."})
    convert("process.exec", {"argv": ["true"], "timeoutMs": 1})
    convert("git.diff", {})


# ------------------------------------------------------------------ intents


def test_intents_name_the_action_and_the_subject_policy_sees() -> None:
    def intent(name: str, arguments: object) -> tuple[str, str | None]:
        authorize = TOOLS[name].authorization
        assert authorize is not None
        result = authorize(convert(name, arguments))
        return result.action, result.subject

    assert intent("fs.read", {"path": "src/a.py"}) == ("fs.read", "src/a.py")
    assert intent("fs.list", {"path": "."}) == ("fs.list", ".")
    assert intent("fs.write", {"path": "src/a.py", "contents": ""}) == ("fs.write", "src/a.py")
    assert intent("process.exec", {"argv": ["uv", "run", "pytest", "-k", "a b"]}) == (
        "process.exec",
        "uv run pytest -k 'a b'",
    )
    assert intent("git.diff", {}) == ("git.diff", None)


@given(st.lists(st.text(), min_size=1, max_size=8))
def test_the_command_subject_is_posix_shell_quoting(argv: list[str]) -> None:
    assert shell_join(argv) == shlex.join(argv)
    assert shlex.split(shell_join(argv)) == argv


# ------------------------------------------------------------------ fs.read


async def test_a_whole_read_returns_path_content_and_size() -> None:
    workspace = MemoryWorkspace({"a.txt": "héllo\r\nworld\n"})
    result = await call("fs.read", {"path": "a.txt"}, workspace)
    assert result == {"path": "a.txt", "content": "héllo\r\nworld\n", "size": 14}


async def test_a_ranged_read_keeps_crlf_and_says_what_is_left() -> None:
    workspace = MemoryWorkspace({"a.txt": "one\r\ntwo\r\nthree\r\nfour"})
    result = await call("fs.read", {"path": "a.txt", "startLine": 2, "maxLines": 2}, workspace)
    assert result == {
        "path": "a.txt",
        "content": "two\r\nthree\r\n",
        "size": 12,
        "startLine": 2,
        "endLine": 3,
        "totalLines": 4,
        "totalSize": 21,
        "hasMore": True,
    }
    last = await call("fs.read", {"path": "a.txt", "startLine": 4}, workspace)
    assert (last["content"], last["endLine"], last["hasMore"]) == ("four", 4, False)
    past = await call("fs.read", {"path": "a.txt", "startLine": 9}, workspace)
    assert (past["content"], past["endLine"], past["hasMore"]) == ("", 8, False)


async def test_a_file_over_the_limit_needs_a_range_and_a_range_of_it_works() -> None:
    line = "x" * 99 + "\n"
    big = line * 2_000  # 200,000 bytes
    workspace = MemoryWorkspace({"big.txt": big})
    with pytest.raises(WorkspaceFileAccessError) as caught:
        await call("fs.read", {"path": "big.txt"}, workspace)
    assert caught.value.code == "TOOL_WORKSPACE_TOO_LARGE"
    assert "startLine and maxLines" in caught.value.message
    assert "2000 lines" in caught.value.message
    ranged = await call("fs.read", {"path": "big.txt", "startLine": 1_500, "maxLines": 400}, workspace)
    assert ranged["content"] == line * 400
    assert (ranged["endLine"], ranged["totalLines"], ranged["totalSize"]) == (1_899, 2_000, 200_000)
    assert json_size(ranged) <= DEVELOPMENT_RESULT_MAX_BYTES


async def test_a_range_of_long_lines_stops_at_the_budget() -> None:
    line = "y" * 9_999 + "\n"
    workspace = MemoryWorkspace({"wide.txt": line * 50})
    result = await call("fs.read", {"path": "wide.txt", "startLine": 1, "maxLines": 400}, workspace)
    assert json_size(result) <= DEVELOPMENT_RESULT_MAX_BYTES
    kept = result["endLine"]
    assert 10 <= kept < 50
    assert result["content"] == line * kept
    assert result["hasMore"] is True
    assert "truncated" not in result


async def test_one_line_longer_than_a_whole_read_keeps_its_head_and_tail() -> None:
    workspace = MemoryWorkspace({"min.js": "a" * 300_000 + "END\nnext\n"})
    result = await call("fs.read", {"path": "min.js", "startLine": 1, "maxLines": 1}, workspace)
    assert json_size(result) <= DEVELOPMENT_RESULT_MAX_BYTES
    assert result["truncated"] is True
    assert result["content"].startswith("aaa")
    assert result["content"].endswith("END\n")
    assert "bytes dropped" in result["content"]
    assert (result["endLine"], result["hasMore"]) == (1, True)


# ------------------------------------------------------------------ fs.list


async def test_a_listing_that_fits_is_whole() -> None:
    workspace = MemoryWorkspace({"a.txt": "", "src/b.py": ""})
    result = await call("fs.list", {"path": "."}, workspace)
    assert result == {"path": ".", "entries": ["a.txt", "src/b.py"], "truncated": False}


async def test_a_long_listing_keeps_head_and_tail_and_marks_what_it_left_out() -> None:
    names = [f"dir/file-{index:06d}.txt" for index in range(20_000)]
    workspace = MemoryWorkspace(dict.fromkeys(names, ""))
    result = await call("fs.list", {"path": "dir"}, workspace)
    assert json_size(result) <= DEVELOPMENT_RESULT_MAX_BYTES
    assert result["truncated"] is True
    entries = result["entries"]
    marker = next(entry for entry in entries if entry.startswith("[…"))
    at = entries.index(marker)
    omitted = int(marker.split()[1])
    assert entries[:at] == sorted(names)[:at]
    assert entries[at + 1 :] == sorted(names)[len(names) - (len(entries) - at - 1) :]
    assert omitted == len(names) - (len(entries) - 1)


# ------------------------------------------------------------------ fs.write


async def test_a_write_lands_and_reports_its_utf8_size() -> None:
    workspace = MemoryWorkspace()
    result = await call("fs.write", {"path": "notes/é.txt", "contents": "ünïcode"}, workspace)
    assert result == {"path": "notes/é.txt", "size": 9}
    assert await workspace.read_file("notes/é.txt") == "ünïcode"


# ------------------------------------------------------------------ process.exec


def _answer(result: CommandResult, seen: list[CommandRequest]) -> Any:
    def handle(command: CommandRequest) -> CommandResult:
        seen.append(command)
        return result

    return handle


async def test_a_command_gets_argv_cwd_timeout_and_the_runs_signal() -> None:
    seen: list[CommandRequest] = []
    answer = CommandResult(exit_code=3, stdout="out", stderr="err", timed_out=False)
    workspace = MemoryWorkspace(commands={"pytest": _answer(answer, seen)})
    signal = AbortController().signal
    arguments = {"argv": ["pytest", "-q"], "cwd": "pkg", "timeoutMs": 5_000}
    result = await call("process.exec", arguments, workspace, signal)
    assert result == {"exitCode": 3, "stdout": "out", "stderr": "err", "timedOut": False, "truncated": False}
    (command,) = seen
    assert (command.argv, command.cwd, command.timeout_ms) == (("pytest", "-q"), "pkg", 5_000)
    assert command.signal is not None  # the dispatcher hands the adapter a linked copy


async def test_the_default_timeout_is_the_maximum() -> None:
    seen: list[CommandRequest] = []
    workspace = MemoryWorkspace(
        commands={"true": _answer(CommandResult(exit_code=0, stdout="", stderr="", timed_out=False), seen)}
    )
    await call("process.exec", {"argv": ["true"]}, workspace)
    assert seen[0].timeout_ms == 30_000


async def test_flooded_output_keeps_the_end_of_a_failing_run() -> None:
    stdout = (
        "".join(f"test_{index} PASSED\n" for index in range(40_000)) + "FAILED test_last - assert 1 == 2\n"
    )
    stderr = "warning\n" * 30_000
    workspace = MemoryWorkspace(
        commands={
            "pytest": lambda command: CommandResult(
                exit_code=1, stdout=stdout, stderr=stderr, timed_out=False
            )
        }
    )
    result = await call("process.exec", {"argv": ["pytest"]}, workspace)
    assert json_size(result) <= DEVELOPMENT_RESULT_MAX_BYTES
    assert result["truncated"] is True
    assert result["stdout"].startswith("test_0 PASSED\n")
    assert result["stdout"].endswith("FAILED test_last - assert 1 == 2\n")
    assert "bytes dropped" in result["stdout"]
    assert result["stderr"].endswith("warning\n")


async def test_a_short_stream_leaves_its_room_to_the_other() -> None:
    stdout = "o" * 200_000
    workspace = MemoryWorkspace(
        commands={
            "x": lambda command: CommandResult(exit_code=0, stdout=stdout, stderr="short", timed_out=False)
        }
    )
    result = await call("process.exec", {"argv": ["x"]}, workspace)
    assert result["stderr"] == "short"
    assert len(result["stdout"]) > DEVELOPMENT_RESULT_MAX_BYTES - 2_000
    assert json_size(result) <= DEVELOPMENT_RESULT_MAX_BYTES


async def test_a_timed_out_command_says_so() -> None:
    workspace = MemoryWorkspace(
        commands={"sleep": lambda command: CommandResult(exit_code=124, stdout="", stderr="", timed_out=True)}
    )
    result = await call("process.exec", {"argv": ["sleep", "60"], "timeoutMs": 10}, workspace)
    assert (result["exitCode"], result["timedOut"]) == (124, True)


# ------------------------------------------------------------------ git.diff


async def test_a_diff_is_bounded_with_its_end_kept() -> None:
    workspace = MemoryWorkspace({f"f{index}.txt": "old\n" for index in range(3_000)})
    for index in range(3_000):
        await workspace.write_file(f"f{index}.txt", "new line that is somewhat longer\n")
    result = await call("git.diff", {}, workspace)
    assert json_size(result) <= DEVELOPMENT_RESULT_MAX_BYTES
    assert result["truncated"] is True
    full = await workspace.diff()
    assert result["diff"].startswith(full[:100])
    assert result["diff"].endswith(full[-100:])


async def test_a_small_diff_is_whole() -> None:
    workspace = MemoryWorkspace({"a.txt": "old\n"})
    await workspace.write_file("a.txt", "new\n")
    result = await call("git.diff", {}, workspace)
    assert result == {"diff": await workspace.diff(), "truncated": False}


# ------------------------------------------------------------------ one operation each


async def test_each_tool_gets_a_view_of_its_own_operation_only() -> None:
    workspace = MemoryWorkspace({"a.txt": "x"})
    tool: Tool[Any] = TOOLS["fs.read"]
    view = restrict_workspace(workspace, "list_files")  # the wrong operation
    context = ToolExecutionContext(signal=None, workspace=view, session_id="s", task_id=None, call_id="c")
    with pytest.raises(WorkspaceOperationUnsupportedError):
        await tool.execute(convert("fs.read", {"path": "a.txt"}), context)
    assert [name for name, _ in workspace.calls] == []
