"""Binding, one-operation views and the strict operation dispatcher."""

# The dispatcher reads the captured methods of the frozen objects this module makes.
# pyright: reportPrivateUsage=false

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Final, NoReturn, final, overload

from harness_workspace._errors import (
    WorkspaceOperationMalformedError,
    WorkspaceOperationRequiredError,
    WorkspaceOperationUnknownError,
    WorkspaceOperationUnsupportedError,
)
from harness_workspace._exact import is_awaitable
from harness_workspace._isolation import inherit_isolation
from harness_workspace._types import (
    WORKSPACE_CAPABILITIES,
    CommandRequest,
    CommandResult,
    DiffRequest,
    DisposeRequest,
    ExecuteRequest,
    ListFilesRequest,
    ReadFileRequest,
    SnapshotRequest,
    Workspace,
    WorkspaceSnapshot,
    WriteFileRequest,
)
from harness_workspace._validation import parse_request

__all__ = ["bind_workspace", "invoke_workspace_operation", "restrict_workspace"]

_Method = Callable[..., object]

# Values that are data, or routines: neither can carry seven receiver-bound methods.
_DATA_TYPES: Final = (str, bytes, bytearray, int, float, complex, bool, list, tuple, dict, set, frozenset)
_ROUTINE_TYPES: Final = (
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    types.MethodWrapperType,
    types.ClassMethodDescriptorType,
    staticmethod,
    classmethod,
)
_VOCABULARY: Final = frozenset(WORKSPACE_CAPABILITIES)


async def _settle(result: object) -> object:
    if is_awaitable(result):
        return await result
    return result


class _FrozenWorkspace:
    """Shared behaviour of the two frozen workspace objects this module makes."""

    # ``__weakref__``: an isolation attestation (``_isolation``) refers to a facade weakly.
    __slots__ = ("__weakref__", "_methods")

    _methods: tuple[_Method, ...]  # in canonical order

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is frozen; cannot set {name!r}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"{type(self).__name__} is frozen; cannot delete {name!r}")

    def __reduce__(self) -> NoReturn:
        raise TypeError(f"{type(self).__name__} cannot be pickled: it holds live capabilities")

    def __copy__(self) -> _FrozenWorkspace:
        return self  # frozen: a copy would be indistinguishable

    def __deepcopy__(self, memo: dict[int, object]) -> _FrozenWorkspace:
        return self  # a capability is shared, never duplicated


@final
class _BoundWorkspace(_FrozenWorkspace):
    """A frozen facade over the seven methods captured from an adapter at binding time."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<bound Workspace>"

    async def read_file(self, path: str) -> str:
        return await _settle(self._methods[0](path))  # type: ignore[return-value]

    async def write_file(self, path: str, contents: str) -> None:
        return await _settle(self._methods[1](path, contents))  # type: ignore[return-value]

    async def list_files(self, path: str) -> list[str]:
        return await _settle(self._methods[2](path))  # type: ignore[return-value]

    async def execute(self, command: CommandRequest) -> CommandResult:
        return await _settle(self._methods[3](command))  # type: ignore[return-value]

    async def diff(self) -> str:
        return await _settle(self._methods[4]())  # type: ignore[return-value]

    async def snapshot(self) -> WorkspaceSnapshot:
        return await _settle(self._methods[5]())  # type: ignore[return-value]

    async def dispose(self) -> None:
        return await _settle(self._methods[6]())  # type: ignore[return-value]


def bind_workspace(value: object) -> Workspace:
    """Capture the seven operations of ``value`` once and return a frozen facade.

    Later changes to ``value``'s attributes are not seen; its state (``self``) stays shared.
    A facade or view made by this module is returned as it is.

    Raises:
        WorkspaceOperationRequiredError: ``value`` is ``None``.
        WorkspaceOperationMalformedError: ``value`` is data or a routine, or inspecting one of
            its operations raised (chained as ``__cause__``).
        WorkspaceOperationUnsupportedError: the first operation, in canonical order, that is
            absent or not callable.
    """
    return _bind(value)


def _bind(value: object) -> _BoundWorkspace | _WorkspaceView:
    if type(value) is _BoundWorkspace or type(value) is _WorkspaceView:
        return value  # already frozen and bound
    facade = object.__new__(_BoundWorkspace)
    object.__setattr__(facade, "_methods", _capture(value))
    inherit_isolation(facade, value)
    return facade


def _capture(value: object) -> tuple[_Method, ...]:
    """Capture the seven operations of an adapter, in canonical order, exactly once each."""
    if value is None:
        raise WorkspaceOperationRequiredError()
    # issubclass on the exact type, not isinstance: isinstance may consult a hostile
    # ``__class__`` property and raise an untyped error.
    kind = type(value)
    if issubclass(kind, _DATA_TYPES) or issubclass(kind, _ROUTINE_TYPES):
        raise WorkspaceOperationMalformedError("workspace capability must be an object")
    methods: list[_Method] = []
    for capability in WORKSPACE_CAPABILITIES:
        try:
            method = getattr(value, capability)
        except AttributeError as error:
            raise WorkspaceOperationUnsupportedError(capability) from error
        except Exception as error:
            raise WorkspaceOperationMalformedError(
                f"workspace capability {capability} could not be inspected", capability
            ) from error
        if not callable(method):
            raise WorkspaceOperationUnsupportedError(capability)
        methods.append(method)
    return tuple(methods)


@final
class _WorkspaceView(_FrozenWorkspace):
    """A frozen view that grants exactly one operation, through the dispatcher."""

    __slots__ = ("_bound", "_granted")

    _bound: _BoundWorkspace | _WorkspaceView
    _granted: str

    def __repr__(self) -> str:
        return f"<Workspace view granting {self._granted}>"

    def _refuse(self, operation: str) -> WorkspaceOperationUnsupportedError:
        return WorkspaceOperationUnsupportedError(
            operation, f"workspace view grants {self._granted}, not {operation}"
        )

    async def read_file(self, path: str) -> str:
        if self._granted != "read_file":
            raise self._refuse("read_file")
        return await invoke_workspace_operation(self._bound, {"operation": "read_file", "path": path})

    async def write_file(self, path: str, contents: str) -> None:
        if self._granted != "write_file":
            raise self._refuse("write_file")
        await invoke_workspace_operation(
            self._bound, {"operation": "write_file", "path": path, "contents": contents}
        )

    async def list_files(self, path: str) -> list[str]:
        if self._granted != "list_files":
            raise self._refuse("list_files")
        return await invoke_workspace_operation(self._bound, {"operation": "list_files", "path": path})

    async def execute(self, command: CommandRequest) -> CommandResult:
        if self._granted != "execute":
            raise self._refuse("execute")
        return await invoke_workspace_operation(self._bound, {"operation": "execute", "command": command})

    async def diff(self) -> str:
        if self._granted != "diff":
            raise self._refuse("diff")
        return await invoke_workspace_operation(self._bound, {"operation": "diff"})

    async def snapshot(self) -> WorkspaceSnapshot:
        if self._granted != "snapshot":
            raise self._refuse("snapshot")
        return await invoke_workspace_operation(self._bound, {"operation": "snapshot"})

    async def dispose(self) -> None:
        if self._granted != "dispose":
            raise self._refuse("dispose")
        await invoke_workspace_operation(self._bound, {"operation": "dispose"})


def restrict_workspace(value: object, capability: str) -> Workspace:
    """Return a frozen view of ``value`` that grants only ``capability``.

    The granted operation goes through :func:`invoke_workspace_operation`, so its arguments
    and result are validated and detached on every call; the six others raise
    ``WorkspaceOperationUnsupportedError`` when awaited, without touching ``value``.

    Raises:
        WorkspaceOperationUnknownError: ``capability`` is not an exact ``str`` naming one of
            the seven operations (checked before ``value`` is inspected).
        WorkspaceOperationRequiredError: ``value`` is ``None``.
        WorkspaceOperationMalformedError: see :func:`bind_workspace`.
        WorkspaceOperationUnsupportedError: see :func:`bind_workspace`.
    """
    if type(capability) is not str:
        raise WorkspaceOperationUnknownError(repr(capability))
    if capability not in _VOCABULARY:
        raise WorkspaceOperationUnknownError(capability)
    bound = _bind(value)
    view = object.__new__(_WorkspaceView)
    set_field = object.__setattr__
    set_field(view, "_bound", bound)
    set_field(view, "_granted", capability)
    set_field(view, "_methods", tuple(getattr(view, name) for name in WORKSPACE_CAPABILITIES))
    inherit_isolation(view, bound)
    return view


def _adapter_methods(workspace: object, operation: str) -> tuple[_Method, ...]:
    """The adapter's captured methods behind ``workspace``, once every view on the way grants ``operation``.

    The request is parsed once, by the caller: asking a view's own method instead would build
    the request again and parse it a second time (and link an ``execute`` signal twice) for
    every layer. Each view still refuses, with its own message, an operation it does not grant.
    """
    target = workspace
    while type(target) is _WorkspaceView:
        if target._granted != operation:
            raise target._refuse(operation)
        target = target._bound
    if type(target) is _BoundWorkspace:
        return target._methods
    return _capture(target)


@overload
async def invoke_workspace_operation(workspace: object, request: ReadFileRequest) -> str: ...
@overload
async def invoke_workspace_operation(workspace: object, request: WriteFileRequest) -> None: ...
@overload
async def invoke_workspace_operation(workspace: object, request: ListFilesRequest) -> list[str]: ...
@overload
async def invoke_workspace_operation(workspace: object, request: ExecuteRequest) -> CommandResult: ...
@overload
async def invoke_workspace_operation(workspace: object, request: DiffRequest) -> str: ...
@overload
async def invoke_workspace_operation(workspace: object, request: SnapshotRequest) -> WorkspaceSnapshot: ...
@overload
async def invoke_workspace_operation(workspace: object, request: DisposeRequest) -> None: ...
@overload
async def invoke_workspace_operation(workspace: object, request: object) -> object: ...
async def invoke_workspace_operation(workspace: object, request: object) -> object:
    """Validate ``request``, call exactly one operation of ``workspace``, validate its result.

    The request is parsed and copied before the workspace is bound, so a bad request wins
    over a missing workspace and never reaches the adapter. Through a view (or a view of a
    view) it is parsed once and its result validated once: the dispatcher checks each view's
    grant itself and calls the adapter directly. Whatever the adapter raises
    propagates as the same object; a malformed return is never turned into success.

    Returns:
        ``str`` for ``read_file`` and ``diff`` (the adapter's own object), ``None`` for
        ``write_file`` and ``dispose``, a new ``list[str]`` for ``list_files``, a new frozen
        :class:`CommandResult` or :class:`WorkspaceSnapshot` (with read-only metadata).

    Raises:
        WorkspaceOperationRequiredError: no request, no operation name, or no workspace.
        WorkspaceOperationMalformedError: a malformed request, capability or result.
        WorkspaceOperationUnknownError: an operation outside the vocabulary.
        WorkspaceOperationUnsupportedError: the workspace lacks one of the seven operations.
    """
    rule, arguments = parse_request(request)
    result = _adapter_methods(workspace, rule.name)[rule.index](*arguments)
    if is_awaitable(result):
        result = await result
    return rule.validate_result(result)
