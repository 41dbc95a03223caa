"""The tool model: ``Tool``, its permission intent, its execution context, ``create_tool``."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Final, Generic, Literal, TypeAlias, TypeVar, final

import msgspec

from harness_workspace import AbortSignal, JsonValue, Workspace

__all__ = [
    "Tool",
    "ToolExecute",
    "ToolExecutionContext",
    "ToolPermissionIntent",
    "create_tool",
    "schema_for_parameters",
]

P = TypeVar("P")

# Model providers accept tool names of letters, digits, "_" and "-"; dots are allowed for
# the dotted names of the development tools (``fs.read``). 64 is the common limit.
_TOOL_NAME: Final = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]{0,63}")


class ToolPermissionIntent(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The policy intent a tool derives from its validated parameters.

    Attributes:
        action: What the call would do, e.g. ``"fs.read"``.
        subject: What it would act on, e.g. the requested path.
        scope: How long a grant should last: this call only, or the rest of the run.
    """

    action: str
    subject: str | None = None
    scope: Literal["once", "run"] | None = None


class ToolExecutionContext(msgspec.Struct, frozen=True, kw_only=True):
    """What the runtime hands a tool for one call.

    Attributes:
        signal: Aborted when the call should stop.
        workspace: An operational workspace, in practice a one-operation view; pure tools
            receive none. Never a string identity.
        session_id: The session the call belongs to.
        task_id: The task the call belongs to.
        call_id: The model's id for this call.
    """

    signal: AbortSignal | None = None
    workspace: Workspace | None = None
    session_id: str | None = None
    task_id: str | None = None
    call_id: str | None = None


ToolExecute: TypeAlias = Callable[[P, "ToolExecutionContext | None"], Awaitable[object]]
"""The shape of ``Tool.execute``: ``async (params, context=None) -> result``."""


@final
class Tool(msgspec.Struct, Generic[P], frozen=True, eq=False, weakref=True, kw_only=True):
    """A tool a model may call: a name, a description, parameters and an effect.

    Tools compare and hash by identity, so the boundary registry can tell the reviewed
    object from an equal-looking copy. Make tools with :func:`create_tool`; declare their
    execution boundary with :func:`~harness_tools.create_bounded_tool`.

    Attributes:
        name: The name advertised to the model.
        description: The description advertised to the model.
        parameters: The type raw model arguments are converted into (strictly) before
            ``authorization`` or ``execute`` runs, normally a frozen msgspec Struct with
            ``forbid_unknown_fields=True``.
        input_schema: The JSON Schema advertised to the model, or ``None``.
        authorization: Derives the permission intent from validated parameters.
        execute: Performs the call.
    """

    name: str
    description: str
    parameters: type[P]
    input_schema: dict[str, JsonValue] | None
    authorization: Callable[[P], ToolPermissionIntent] | None
    execute: ToolExecute[P]

    def __repr__(self) -> str:
        return f"<Tool {self.name!r} at {id(self):#x}>"


def schema_for_parameters(parameters: object) -> dict[str, JsonValue] | None:
    """Return the JSON Schema advertised for a msgspec Struct type, or ``None`` for other types.

    The Struct's own definition is inlined at the top level and msgspec's ``title`` is
    dropped; definitions of nested Structs stay under ``$defs``. A Struct declared with
    ``forbid_unknown_fields=True`` yields ``"additionalProperties": false``.
    """
    if not (isinstance(parameters, type) and issubclass(parameters, msgspec.Struct)):
        return None
    (reference,), components = msgspec.json.schema_components([parameters])
    name = str(reference["$ref"]).rsplit("/", 1)[-1]
    schema: dict[str, JsonValue] = dict(components.pop(name))
    schema.pop("title", None)
    if components:
        schema["$defs"] = components
    return schema


def create_tool(
    *,
    name: str,
    description: str,
    parameters: type[P],
    execute: ToolExecute[P],
    input_schema: dict[str, JsonValue] | None = None,
    authorization: Callable[[P], ToolPermissionIntent] | None = None,
) -> Tool[P]:
    """Create an **unbounded** tool; a runtime denies it until a boundary is declared.

    When ``input_schema`` is ``None`` and ``parameters`` is a msgspec Struct type, the
    schema is generated from it (see :func:`schema_for_parameters`).

    Raises:
        TypeError: an argument has the wrong type (``execute`` or ``authorization`` not
            callable, ``input_schema`` not a dict).
        ValueError: ``name`` is not a valid tool name (a letter, then up to 63 letters,
            digits, ``_``, ``-`` or ``.``).
    """
    if type(name) is not str or _TOOL_NAME.fullmatch(name) is None:
        raise ValueError(f"invalid tool name {name!r}: use a letter, then letters, digits, '_', '-' or '.'")
    if type(description) is not str:
        raise TypeError("tool description must be a str")
    if not callable(execute):
        raise TypeError("tool execute must be callable")
    if authorization is not None and not callable(authorization):
        raise TypeError("tool authorization must be callable or None")
    if input_schema is None:
        input_schema = schema_for_parameters(parameters)
    elif type(input_schema) is not dict:
        raise TypeError("tool input_schema must be a dict or None")
    return Tool(
        name=name,
        description=description,
        parameters=parameters,
        input_schema=input_schema,
        authorization=authorization,
        execute=execute,
    )
