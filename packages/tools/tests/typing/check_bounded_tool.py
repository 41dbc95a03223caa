"""A downstream team defines a bounded tool: typed usage checked by pyright strict (never executed).

Like msgspec's typing tests: if the public types of harness_tools stop being usable the way a
team outside the project uses them, pyright fails here before anyone ships a tool.
"""

from __future__ import annotations

from typing import Annotated, assert_type

import msgspec

from harness_tools import (
    InvalidToolArgumentsError,
    ReadFileParameters,
    Tool,
    ToolExecutionBoundary,
    ToolExecutionContext,
    ToolPermissionIntent,
    ToolRegistry,
    WorkspaceBoundary,
    check_workspace_path,
    create_bounded_tool,
    create_read_file_tool,
    create_tool,
    get_tool_execution_boundary,
    parse_tool_arguments,
)
from harness_workspace import MemoryWorkspace, WorkspaceOperationError, restrict_workspace


class ListSourcesParameters(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    directory: Annotated[str, msgspec.Meta(min_length=1)]
    suffix: str = ".py"

    def __post_init__(self) -> None:
        # Model-facing paths are canonical before policy sees them; "." names the root.
        assert_type(check_workspace_path(self.directory, allow_root=True), str)


async def list_sources(
    params: ListSourcesParameters, context: ToolExecutionContext | None = None
) -> dict[str, list[str]]:
    if context is None or context.workspace is None:
        return {"files": []}
    names = await context.workspace.list_files(params.directory)
    return {"files": [name for name in names if name.endswith(params.suffix)]}


def authorize_list_sources(params: ListSourcesParameters) -> ToolPermissionIntent:
    return ToolPermissionIntent(action="fs.list", subject=params.directory, scope="once")


async def downstream_team_defines_a_bounded_tool(raw_arguments: object) -> None:
    tool = create_tool(
        name="list_sources",
        description="List the source files below a directory.",
        parameters=ListSourcesParameters,
        execute=list_sources,
        authorization=authorize_list_sources,
    )
    assert_type(tool, Tool[ListSourcesParameters])

    bounded = create_bounded_tool(tool, WorkspaceBoundary(capability="list_files", root="/srv/checkout"))
    assert_type(bounded, Tool[ListSourcesParameters])

    registry = ToolRegistry([create_read_file_tool("/srv/checkout")]).add(bounded)
    assert_type(registry, ToolRegistry)
    assert_type(registry.has("list_sources"), bool)

    boundary = get_tool_execution_boundary(bounded)
    assert_type(boundary, ToolExecutionBoundary | None)
    if not isinstance(boundary, WorkspaceBoundary):
        return
    view = restrict_workspace(MemoryWorkspace({"src/app.py": ""}), boundary.capability)

    try:
        params = parse_tool_arguments(bounded, raw_arguments)
    except InvalidToolArgumentsError as error:
        assert_type(error.path, str)
        return
    assert_type(params, ListSourcesParameters)

    if bounded.authorization is not None:
        assert_type(bounded.authorization(params), ToolPermissionIntent)
    try:
        await bounded.execute(params, ToolExecutionContext(workspace=view))
    except WorkspaceOperationError as error:
        assert_type(error.code, str)


def read_file_is_typed_by_its_parameters() -> None:
    reader = create_read_file_tool("/srv/checkout")
    assert_type(reader, Tool[ReadFileParameters])
    assert_type(parse_tool_arguments(reader, {"path": "README.md"}), ReadFileParameters)
    assert_type(reader.parameters, type[ReadFileParameters])
