"""Execution boundaries: reviewed declarations of what a tool may reach, bound by identity."""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Final, Literal, TypeAlias, TypeVar

import msgspec

from harness_tools._errors import InvalidToolExecutionBoundaryError
from harness_tools._model import Tool

__all__ = [
    "REVIEWED_WORKSPACE_CAPABILITIES",
    "WORKSPACE_CAPABILITY_ACCESS",
    "PureBoundary",
    "SandboxBoundary",
    "ToolExecutionBoundary",
    "WorkspaceBoundary",
    "create_bounded_tool",
    "get_tool_execution_boundary",
]

P = TypeVar("P")

WORKSPACE_CAPABILITY_ACCESS: Final[Mapping[str, Literal["read", "write", "execute"]]] = MappingProxyType(
    {
        "read_file": "read",
        "list_files": "read",
        "diff": "read",
        "snapshot": "read",
        "write_file": "write",
        "execute": "execute",
    }
)
"""Each workspace operation a model-facing tool may be granted, with the access it declares.

Reads run on any injected workspace. ``write`` and ``execute`` change or run things, so the
admission table lets them act only on a workspace declared isolated (issue #17;
``harness_workspace.isolation_of``). ``dispose`` is never granted to a tool.
"""

REVIEWED_WORKSPACE_CAPABILITIES: Final = frozenset(WORKSPACE_CAPABILITY_ACCESS)
"""The workspace operations a model-facing tool may be granted (every one but ``dispose``)."""


class PureBoundary(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The tool computes from its parameters alone and receives no workspace."""

    kind: ClassVar[Literal["pure"]] = "pure"


class WorkspaceBoundary(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The tool acts through one reviewed workspace operation under ``root``.

    ``access`` is the reviewer's statement of what the operation does and must match it
    (:data:`WORKSPACE_CAPABILITY_ACCESS`): a tool that writes says ``write``, one that runs
    commands says ``execute``; it is never inferred. ``root`` is review metadata kept
    verbatim, never a path the tool opens.
    """

    kind: ClassVar[Literal["workspace"]] = "workspace"
    capability: Literal["read_file", "list_files", "diff", "snapshot", "write_file", "execute"]
    root: str
    access: Literal["read", "write", "execute"] = "read"


class SandboxBoundary(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The tool runs inside a sandbox rooted at ``root`` (verbatim review metadata)."""

    kind: ClassVar[Literal["sandbox"]] = "sandbox"
    root: str


ToolExecutionBoundary: TypeAlias = PureBoundary | WorkspaceBoundary | SandboxBoundary
"""Any validated execution boundary record."""

_ACCESSES: Final = frozenset({"read", "write", "execute"})

_KEY_SETS: Final[dict[str, frozenset[str]]] = {
    "pure": frozenset({"kind"}),
    "workspace": frozenset({"kind", "access", "capability", "root"}),
    "sandbox": frozenset({"kind", "root"}),
}

# Weak keys, so the registry keeps no tool alive; ``Tool`` hashes by identity, so a copy
# or an equal-looking tool is a different key.
_BOUNDARIES: Final[weakref.WeakKeyDictionary[Tool[Any], ToolExecutionBoundary]] = weakref.WeakKeyDictionary()


def _fail(message: str) -> InvalidToolExecutionBoundaryError:
    return InvalidToolExecutionBoundaryError(message)


def _boundary_fields(boundary: object) -> dict[object, object]:
    if type(boundary) is PureBoundary:
        return {"kind": "pure"}
    if type(boundary) is WorkspaceBoundary:
        return {
            "kind": "workspace",
            "access": boundary.access,
            "capability": boundary.capability,
            "root": boundary.root,
        }
    if type(boundary) is SandboxBoundary:
        return {"kind": "sandbox", "root": boundary.root}
    if type(boundary) is dict:
        return boundary  # pyright: ignore[reportUnknownVariableType]  # keys are checked next
    raise _fail("tool execution boundary must be an object")


def validate_boundary(boundary: object) -> ToolExecutionBoundary:
    """Validate a boundary (an exact dict or a record) and return its normalised record.

    Raises:
        InvalidToolExecutionBoundaryError: the boundary breaks a rule; the first rule
            broken, in the specification's order, names the message.
    """
    try:
        fields = _boundary_fields(boundary)
    except AttributeError as error:  # a record whose fields were never set
        raise _fail("tool execution boundary must be an object") from error
    for key in fields:
        if type(key) is not str:
            raise _fail("tool execution boundary contains unexpected properties")
    if "kind" not in fields:
        raise _fail("tool execution boundary property kind must be present")
    kind = fields["kind"]
    if type(kind) is not str or kind not in _KEY_SETS:
        raise _fail("tool execution boundary kind is unknown")
    if fields.keys() != _KEY_SETS[kind]:
        raise _fail("tool execution boundary contains unexpected properties")
    if kind == "pure":
        return PureBoundary()
    root = fields["root"]
    if kind == "workspace":
        access = fields["access"]
        if type(access) is not str or access not in _ACCESSES:
            raise _fail("workspace tool boundary access must be read, write or execute")
        capability = fields["capability"]
        if type(capability) is not str or capability not in REVIEWED_WORKSPACE_CAPABILITIES:
            raise _fail("workspace tool boundary capability must be a reviewed operation")
        declared = WORKSPACE_CAPABILITY_ACCESS[capability]
        if declared != access:
            raise _fail(f"workspace tool boundary access must be {declared} for {capability}")
        if type(root) is not str or not root:
            raise _fail("workspace tool boundary root must be a nonempty string")
        return WorkspaceBoundary(capability=capability, root=root, access=access)  # type: ignore[arg-type]
    if type(root) is not str or not root:
        raise _fail("sandbox tool boundary root must be a nonempty string")
    return SandboxBoundary(root=root)


def create_bounded_tool(tool: Tool[P], boundary: object) -> Tool[P]:
    """Declare ``tool``'s execution boundary and return **the same object**.

    The boundary is validated first (on failure nothing is recorded), then recorded in an
    identity registry: copies of the tool, or look-alikes, stay unbounded.

    Raises:
        InvalidToolExecutionBoundaryError: the boundary is invalid, or the tool already
            has a boundary (so no holder can re-declare a workspace tool as pure).
        TypeError: ``tool`` is not exactly a :class:`Tool`.
    """
    record = validate_boundary(boundary)
    if type(tool) is not Tool:
        raise TypeError(f"create_bounded_tool expects a Tool, got {type(tool).__name__}")
    if tool in _BOUNDARIES:
        raise _fail("tool already has an execution boundary")
    _BOUNDARIES[tool] = record
    return tool


def get_tool_execution_boundary(tool: object) -> ToolExecutionBoundary | None:
    """Return the boundary recorded for exactly this tool object, or ``None``; never raises."""
    if type(tool) is not Tool:
        return None
    return _BOUNDARIES.get(tool)  # pyright: ignore[reportUnknownArgumentType]
