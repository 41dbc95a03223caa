"""``read_file``: the reviewed tool that reads one text file through an injected workspace.

Its ``path`` must be a canonical workspace path (:func:`check_workspace_path`): checked
when the arguments are converted, so the permission subject, the ``tool.call`` input and
the path the workspace is asked to open are one string.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Final, TypeGuard

import msgspec

from harness_tools._boundaries import WorkspaceBoundary, create_bounded_tool
from harness_tools._errors import (
    TOOL_WORKSPACE_INVALID_ROOT,
    TOOL_WORKSPACE_READ_FAILED,
    TOOL_WORKSPACE_TOO_LARGE,
    WorkspaceFileAccessError,
)
from harness_tools._model import Tool, ToolExecutionContext, ToolPermissionIntent, create_tool
from harness_tools._paths import check_workspace_path
from harness_workspace import WorkspaceOperationRequiredError, invoke_workspace_operation

__all__ = ["READ_FILE_MAX_BYTES", "ReadFileParameters", "create_read_file_tool"]

READ_FILE_MAX_BYTES: Final = 131_072
"""The most UTF-8 bytes ``read_file`` hands to a model (128 KiB)."""


# No docstring: msgspec would advertise it to the model as the schema's description.
class ReadFileParameters(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    path: Annotated[str, msgspec.Meta(min_length=1)]

    def __post_init__(self) -> None:
        # The path must be canonical before anything sees it: conversion runs this, so a
        # refused path is invalid input and never reaches policy or the workspace. The
        # empty path stays the schema's (``minLength``) and the dispatcher's to refuse.
        if self.path:
            check_workspace_path(self.path)


def _authorize(params: ReadFileParameters) -> ToolPermissionIntent:
    return ToolPermissionIntent(action="fs.read", subject=params.path, scope="once")


def _is_dict(value: object) -> TypeGuard[dict[object, object]]:
    return type(value) is dict


def _utf8_size(content: str) -> int:
    # Every code point is at least one byte, so a long string is too large without encoding;
    # ASCII is one byte per code point (isascii is O(1) in CPython); only otherwise encode.
    if len(content) > READ_FILE_MAX_BYTES or content.isascii():
        return len(content)
    return len(content.encode("utf-8", "surrogatepass"))


async def _read_file(params: object, context: ToolExecutionContext | None = None) -> dict[str, object]:
    if context is None or context.workspace is None:
        raise WorkspaceOperationRequiredError("read_file requires an injected workspace capability")
    request: dict[str, object] = {"operation": "read_file"}
    if _is_dict(params):
        if "path" in params:
            request["path"] = params["path"]
    else:
        # Without a path attribute the request carries no path, and the dispatcher
        # reports MALFORMED without calling the adapter.
        with contextlib.suppress(AttributeError):
            request["path"] = getattr(params, "path")  # noqa: B009 - params is typed object
    path = request.get("path")
    if type(path) is str and path:
        # Params built without conversion (a dict, another object) get the same check, so
        # the workspace is only ever asked for a canonical path.
        check_workspace_path(path)
    content = await invoke_workspace_operation(context.workspace, request)
    if type(content) is not str:  # unreachable: the dispatcher validates the result
        raise WorkspaceFileAccessError(
            TOOL_WORKSPACE_READ_FAILED, "read_file workspace returned non-text content"
        )
    size = _utf8_size(content)
    if size > READ_FILE_MAX_BYTES:
        raise WorkspaceFileAccessError(TOOL_WORKSPACE_TOO_LARGE, "read_file is limited to 131072 bytes")
    return {"path": path, "content": content, "size": size}


def create_read_file_tool(workspace_root: str) -> Tool[ReadFileParameters]:
    """Create the reviewed ``read_file`` tool, bounded to the workspace ``read_file`` operation.

    Args:
        workspace_root: Review metadata for the boundary, kept verbatim (not resolved).

    Raises:
        WorkspaceFileAccessError: ``workspace_root`` is not a nonempty ``str``
            (``TOOL_WORKSPACE_INVALID_ROOT``); no workspace is consulted.
    """
    if type(workspace_root) is not str or not workspace_root:
        raise WorkspaceFileAccessError(
            TOOL_WORKSPACE_INVALID_ROOT, "read_file requires workspace boundary metadata"
        )
    tool = create_tool(
        name="read_file",
        description="Read a UTF-8 text file from the workspace.",
        parameters=ReadFileParameters,
        authorization=_authorize,
        execute=_read_file,
    )
    return create_bounded_tool(tool, WorkspaceBoundary(capability="read_file", root=workspace_root))
