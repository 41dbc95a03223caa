"""The five development tools: ``fs.read``, ``fs.list``, ``fs.write``, ``process.exec``, ``git.diff``.

Each is a reviewed workspace tool bound to exactly one operation (its boundary), with a policy
intent derived from its validated arguments, and a result that is at most
:data:`DEVELOPMENT_RESULT_MAX_BYTES` of JSON. Long output keeps its head and its tail with a marker that
says how much was dropped (``_bounded_output``): a model needs the end of a failing test run.
``fs.write`` and ``process.exec`` declare ``write`` and ``execute`` access, so the admission
table lets them act only on a workspace declared isolated (decision 039).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final, TypeVar

from harness_tools._boundaries import WorkspaceBoundary, create_bounded_tool
from harness_tools._bounded_output import BOUND_TEXT_MIN_JSON_BYTES, bound_items, bound_text, json_string_size
from harness_tools._dev_parameters import (
    READ_MAX_LINES,
    FsListParameters,
    FsReadParameters,
    FsWriteParameters,
    GitDiffParameters,
    ProcessExecParameters,
)
from harness_tools._errors import (
    TOOL_WORKSPACE_INVALID_ROOT,
    TOOL_WORKSPACE_READ_FAILED,
    TOOL_WORKSPACE_TOO_LARGE,
    WorkspaceFileAccessError,
)
from harness_tools._model import Tool, ToolExecute, ToolExecutionContext, ToolPermissionIntent, create_tool
from harness_workspace import (
    CommandRequest,
    CommandResult,
    Workspace,
    WorkspaceOperationRequiredError,
    invoke_workspace_operation,
)

P = TypeVar("P")

__all__ = ["DEVELOPMENT_RESULT_MAX_BYTES", "DEVELOPMENT_TOOL_NAMES", "create_development_tools"]

DEVELOPMENT_RESULT_MAX_BYTES: Final = 131_072
"""The most bytes of compact JSON a development tool's result takes (128 KiB)."""

DEVELOPMENT_TOOL_NAMES: Final = ("fs.read", "fs.list", "fs.write", "process.exec", "git.diff")
"""The five tools, in the order :func:`create_development_tools` returns them."""

# Room for a result's keys, punctuation, numbers and the echoed path (at most 4,096
# characters, each at most 6 bytes of JSON): what is left of the budget is the payload's.
_ENVELOPE_BYTES: Final = 512
_PATH_BYTES: Final = 6 * 4_096 + 2


def _workspace(context: ToolExecutionContext | None, tool: str) -> Workspace:
    if context is None or context.workspace is None:
        raise WorkspaceOperationRequiredError(f"{tool} requires an injected workspace capability")
    return context.workspace


def _payload_budget(path: str | None) -> int:
    return DEVELOPMENT_RESULT_MAX_BYTES - _ENVELOPE_BYTES - (0 if path is None else json_string_size(path))


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


# ------------------------------------------------------------------ fs.read


def _lines(content: str) -> list[str]:
    """The lines of ``content``, each with its own ending (``\\r\\n`` kept); no empty last line."""
    parts = content.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


async def _read(params: FsReadParameters, context: ToolExecutionContext | None = None) -> dict[str, object]:
    workspace = _workspace(context, "fs.read")
    content = await invoke_workspace_operation(workspace, {"operation": "read_file", "path": params.path})
    if type(content) is not str:  # unreachable: the dispatcher validates the result
        raise WorkspaceFileAccessError(TOOL_WORKSPACE_READ_FAILED, "fs.read: the workspace returned no text")
    budget = _payload_budget(params.path)
    if not params.ranged:
        if json_string_size(content) > budget:
            raise WorkspaceFileAccessError(
                TOOL_WORKSPACE_TOO_LARGE,
                f"fs.read: {params.path} is {_utf8_size(content)} bytes, more than one read returns"
                f" ({DEVELOPMENT_RESULT_MAX_BYTES} bytes of JSON); read it in ranges with startLine"
                f" and maxLines ({len(_lines(content))} lines, at most {READ_MAX_LINES} per read)",
            )
        return {"path": params.path, "content": content, "size": _utf8_size(content)}
    return _ranged(params, content, budget)


def _ranged(params: FsReadParameters, content: str, budget: int) -> dict[str, object]:
    lines = _lines(content)
    start = params.start_line if type(params.start_line) is int else 1
    count = params.max_lines if type(params.max_lines) is int else READ_MAX_LINES
    chosen: list[str] = []
    used = 2  # the quotes of the content string
    cut = False
    for line in lines[start - 1 : start - 1 + count]:
        size = json_string_size(line) - 2
        if used + size > budget:
            if not chosen:
                # One line longer than a whole read: its head and tail, marked.
                chosen.append(bound_text(line, budget).text)
                cut = True
            break
        chosen.append(line)
        used += size
    text = "".join(chosen)
    end = start + len(chosen) - 1
    result: dict[str, object] = {
        "path": params.path,
        "content": text,
        "size": _utf8_size(text),
        "startLine": start,
        "endLine": end,
        "totalLines": len(lines),
        "totalSize": _utf8_size(content),
        "hasMore": end < len(lines),
    }
    if cut:
        result["truncated"] = True
    return result


def _read_intent(params: FsReadParameters) -> ToolPermissionIntent:
    return ToolPermissionIntent(action="fs.read", subject=params.path, scope="once")


# ------------------------------------------------------------------ fs.list


def _omitted_marker(count: int) -> str:
    return f"[… {count} entries omitted …]"


async def _list(params: FsListParameters, context: ToolExecutionContext | None = None) -> dict[str, object]:
    workspace = _workspace(context, "fs.list")
    entries = await invoke_workspace_operation(workspace, {"operation": "list_files", "path": params.path})
    # The marker's own size comes off the budget first, so the marked list still fits.
    budget = _payload_budget(params.path) - json_string_size(_omitted_marker(len(entries))) - 1
    kept = bound_items(entries, budget)
    listed = list(kept.items)
    if kept.truncated:
        listed.insert(kept.head_count, _omitted_marker(kept.dropped_items))
    return {"path": params.path, "entries": listed, "truncated": kept.truncated}


def _list_intent(params: FsListParameters) -> ToolPermissionIntent:
    return ToolPermissionIntent(action="fs.list", subject=params.path, scope="once")


# ------------------------------------------------------------------ fs.write


async def _write(params: FsWriteParameters, context: ToolExecutionContext | None = None) -> dict[str, object]:
    workspace = _workspace(context, "fs.write")
    request = {"operation": "write_file", "path": params.path, "contents": params.contents}
    await invoke_workspace_operation(workspace, request)
    return {"path": params.path, "size": _utf8_size(params.contents)}


def _write_intent(params: FsWriteParameters) -> ToolPermissionIntent:
    return ToolPermissionIntent(action="fs.write", subject=params.path, scope="once")


# ------------------------------------------------------------------ process.exec


def _share(first: str, second: str, budget: int) -> tuple[int, int]:
    """JSON budgets for two streams: each its half, and what one leaves unused to the other."""
    half = budget // 2
    first_size, second_size = json_string_size(first), json_string_size(second)
    if first_size + second_size <= budget:
        return first_size, second_size
    if first_size <= half:
        return first_size, budget - first_size
    if second_size <= half:
        return budget - second_size, second_size
    return half, budget - half


async def _exec(
    params: ProcessExecParameters, context: ToolExecutionContext | None = None
) -> dict[str, object]:
    workspace = _workspace(context, "process.exec")
    assert context is not None
    command = CommandRequest(
        argv=tuple(params.argv),
        cwd=params.cwd if type(params.cwd) is str else None,
        timeout_ms=params.timeout_ms,
        # The run's signal: cancelling the run stops the command's whole process group.
        signal=context.signal,
    )
    result = await invoke_workspace_operation(workspace, {"operation": "execute", "command": command})
    assert type(result) is CommandResult
    stdout_budget, stderr_budget = _share(result.stdout, result.stderr, _payload_budget(None))
    # A budget under bound_text's minimum is a stream's own, smaller size: it fits as it is.
    stdout = bound_text(result.stdout, max(stdout_budget, BOUND_TEXT_MIN_JSON_BYTES))
    stderr = bound_text(result.stderr, max(stderr_budget, BOUND_TEXT_MIN_JSON_BYTES))
    return {
        "exitCode": result.exit_code,
        "stdout": stdout.text,
        "stderr": stderr.text,
        "timedOut": result.timed_out,
        "truncated": stdout.truncated or stderr.truncated,
    }


_SHELL_SAFE: Final = re.compile(r"[\w@%+=:,./-]+", re.ASCII)


def shell_join(argv: list[str]) -> str:
    """``argv`` as one POSIX shell command line, each argument quoted only where needed.

    The same text as the standard library's ``shlex.join`` (a test checks it over arbitrary
    argv); written here because ``shlex`` as a whole can open files (``sourcehook``) and is
    not on the import allow-list.
    """
    return " ".join(_shell_quote(argument) for argument in argv)


def _shell_quote(argument: str) -> str:
    if not argument:
        return "''"
    if _SHELL_SAFE.fullmatch(argument):
        return argument
    return "'" + argument.replace("'", "'\"'\"'") + "'"


def _exec_intent(params: ProcessExecParameters) -> ToolPermissionIntent:
    # POSIX shell quoting, so a manifest rule like "uv run pytest*" reads as the command does.
    return ToolPermissionIntent(action="process.exec", subject=shell_join(params.argv), scope="once")


# ------------------------------------------------------------------ git.diff


async def _diff(params: GitDiffParameters, context: ToolExecutionContext | None = None) -> dict[str, object]:
    workspace = _workspace(context, "git.diff")
    diff = await invoke_workspace_operation(workspace, {"operation": "diff"})
    bounded = bound_text(diff, _payload_budget(None))
    return {"diff": bounded.text, "truncated": bounded.truncated}


def _diff_intent(params: GitDiffParameters) -> ToolPermissionIntent:
    return ToolPermissionIntent(action="git.diff", scope="once")


# ------------------------------------------------------------------ the factory


def _bounded(
    name: str,
    description: str,
    parameters: type[P],
    *,
    execute: ToolExecute[P],
    authorize: Callable[[P], ToolPermissionIntent],
    boundary: WorkspaceBoundary,
) -> Tool[P]:
    tool = create_tool(
        name=name, description=description, parameters=parameters, execute=execute, authorization=authorize
    )
    return create_bounded_tool(tool, boundary)


def create_development_tools(workspace_root: str) -> tuple[Tool[Any], ...]:
    """Create the five reviewed development tools, in :data:`DEVELOPMENT_TOOL_NAMES` order.

    Args:
        workspace_root: Review metadata for each boundary, kept verbatim (not resolved); a
            server admits the tools only in a session whose workspace it names.

    Raises:
        WorkspaceFileAccessError: ``workspace_root`` is not a nonempty ``str``
            (``TOOL_WORKSPACE_INVALID_ROOT``).
    """
    if type(workspace_root) is not str or not workspace_root:
        raise WorkspaceFileAccessError(
            TOOL_WORKSPACE_INVALID_ROOT, "the development tools require workspace boundary metadata"
        )

    def boundary(capability: str, access: str = "read") -> WorkspaceBoundary:
        return WorkspaceBoundary(capability=capability, root=workspace_root, access=access)  # type: ignore[arg-type]

    return (
        _bounded(
            "fs.read",
            "Read a UTF-8 text file of the workspace. Give startLine and/or maxLines (at most 400)"
            " to read a range of lines; a file over 128 KiB must be read in ranges.",
            FsReadParameters,
            execute=_read,
            authorize=_read_intent,
            boundary=boundary("read_file"),
        ),
        _bounded(
            "fs.list",
            'List the files below a workspace directory ("." for the whole workspace).',
            FsListParameters,
            execute=_list,
            authorize=_list_intent,
            boundary=boundary("list_files"),
        ),
        _bounded(
            "fs.write",
            "Write a UTF-8 text file of the workspace (at most 128 KiB), replacing it if it exists.",
            FsWriteParameters,
            execute=_write,
            authorize=_write_intent,
            boundary=boundary("write_file", "write"),
        ),
        _bounded(
            "process.exec",
            "Run a program in the workspace: argv only (no shell), an optional workspace-relative"
            " cwd, and timeoutMs (at most 30000). Returns the exit code and the output; long"
            " output keeps its beginning and its end.",
            ProcessExecParameters,
            execute=_exec,
            authorize=_exec_intent,
            boundary=boundary("execute", "execute"),
        ),
        _bounded(
            "git.diff",
            "Show the workspace's changes against its last commit, as a unified diff.",
            GitDiffParameters,
            execute=_diff,
            authorize=_diff_intent,
            boundary=boundary("diff"),
        ),
    )
