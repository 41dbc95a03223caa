"""Shared builders for the dispatcher's request tests: error checks run three ways, hostile values.

Every malformed request is checked three ways: against a live in-memory adapter (which must
record no call), against a tripwire whose every attribute lookup is recorded (binding must not
even start), and with no workspace at all (a bad request wins over a missing workspace). All
three must report the same typed error.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple, cast

import msgspec
import pytest
import trio

from harness_workspace import (
    AbortSignal,
    CommandRequest,
    MemoryWorkspace,
    WorkspaceOperationError,
    WorkspaceOperationMalformedError,
    WorkspaceOperationRequiredError,
    WorkspaceOperationUnknownError,
    WorkspaceOperationUnsupportedError,
    invoke_workspace_operation,
)

ERROR_CODES: dict[type[WorkspaceOperationError], str] = {
    WorkspaceOperationRequiredError: "WORKSPACE_OPERATION_REQUIRED",
    WorkspaceOperationMalformedError: "WORKSPACE_OPERATION_MALFORMED",
    WorkspaceOperationUnknownError: "WORKSPACE_OPERATION_UNKNOWN",
    WorkspaceOperationUnsupportedError: "WORKSPACE_OPERATION_UNSUPPORTED",
}

MAX_SAFE_INTEGER = 2**53 - 1


# ------------------------------------------------------------------ helpers


class TripwireWorkspace:
    """Records every attribute lookup; a dispatcher that rejects the request first never looks."""

    def __init__(self) -> None:
        self.touched: list[str] = []

    def __getattr__(self, name: str) -> object:
        self.touched.append(name)
        raise AttributeError(name)


def assert_error(
    error: BaseException,
    error_type: type[WorkspaceOperationError],
    message: str,
    operation: str | None,
) -> None:
    """Assert the exact class, code, message and operation of a typed workspace error."""
    assert type(error) is error_type
    assert isinstance(error, WorkspaceOperationError)
    assert error.code == ERROR_CODES[error_type]
    assert str(error) == message
    assert error.operation == operation


async def rejection_of(request: object) -> WorkspaceOperationError:
    """Invoke ``request`` three ways and return the error, once all three agree and no adapter ran."""
    memory = MemoryWorkspace({"a.txt": "text"})
    with pytest.raises(WorkspaceOperationError) as with_adapter:
        await invoke_workspace_operation(memory, request)
    assert memory.calls == []

    tripwire = TripwireWorkspace()
    with pytest.raises(WorkspaceOperationError) as with_tripwire:
        await invoke_workspace_operation(tripwire, request)
    assert tripwire.touched == []

    with pytest.raises(WorkspaceOperationError) as without_workspace:
        await invoke_workspace_operation(None, request)

    expected = with_adapter.value
    for other in (with_tripwire.value, without_workspace.value):
        assert type(other) is type(expected)
        assert (other.code, str(other), other.operation) == (expected.code, str(expected), expected.operation)
    return expected


async def assert_rejected(
    request: object,
    error_type: type[WorkspaceOperationError],
    message: str,
    operation: str | None,
) -> WorkspaceOperationError:
    """Assert that ``request`` is refused with exactly this error before any adapter code runs."""
    error = await rejection_of(request)
    assert_error(error, error_type, message, operation)
    return error


async def assert_malformed(request: object, message: str, operation: str | None) -> WorkspaceOperationError:
    """Shorthand for a MALFORMED rejection."""
    return await assert_rejected(request, WorkspaceOperationMalformedError, message, operation)


async def executed_command(command: object) -> CommandRequest:
    """Run a well-formed ``execute`` request on a memory adapter; return what the adapter received."""
    memory = MemoryWorkspace()
    request: object = {"operation": "execute", "command": command}
    await invoke_workspace_operation(memory, request)
    assert len(memory.calls) == 1
    name, arguments = memory.calls[0]
    assert name == "execute"
    assert len(arguments) == 1
    received = arguments[0]
    assert type(received) is CommandRequest
    return received


build_command_request = cast("Callable[..., CommandRequest]", CommandRequest)
"""``CommandRequest`` called with deliberately ill-typed fields (msgspec does not validate them)."""


def command_in_form(form: str, fields: Mapping[str, object]) -> object:
    """Return the command as a plain dict or as an exact ``CommandRequest`` with the same fields."""
    if form == "dict":
        return dict(fields)
    return build_command_request(**fields)


class StrSubclass(str):
    """A ``str`` subclass that records any comparison or hashing run on it."""

    consulted: list[str]

    def __eq__(self, other: object) -> bool:
        StrSubclass.consulted.append("__eq__")
        return str.__eq__(self, other)

    def __hash__(self) -> int:
        StrSubclass.consulted.append("__hash__")
        return str.__hash__(self)


StrSubclass.consulted = []


class IntSubclass(int):
    """An ``int`` subclass; the contract accepts only exact ``int``."""


class Number(enum.IntEnum):
    """An ``IntEnum`` member is an ``int`` subclass too."""

    FIVE = 5


class DictSubclass(dict[object, object]):
    """A ``dict`` subclass whose overridden lookups would show the validator a different value."""

    def __init__(self, data: Mapping[object, object]) -> None:
        super().__init__(data)
        self.consulted: list[str] = []

    def __getitem__(self, key: object) -> object:
        self.consulted.append("__getitem__")
        return super().__getitem__(key)

    def __iter__(self) -> Iterator[object]:
        self.consulted.append("__iter__")
        return super().__iter__()

    def __len__(self) -> int:
        self.consulted.append("__len__")
        return super().__len__()

    def __contains__(self, key: object) -> bool:
        self.consulted.append("__contains__")
        return super().__contains__(key)


class ListSubclass(list[object]):
    """A ``list`` subclass whose overridden accessors would run caller code."""

    def __init__(self, items: list[object]) -> None:
        super().__init__(items)
        self.consulted: list[str] = []

    def __iter__(self) -> Iterator[object]:
        self.consulted.append("__iter__")
        return super().__iter__()

    def __len__(self) -> int:
        self.consulted.append("__len__")
        return super().__len__()


class ProgramAndArgument(NamedTuple):
    """A namedtuple is a ``tuple`` subclass, not an exact array."""

    program: str
    argument: str


@dataclass(frozen=True)
class ReadFileShape:
    """A dataclass with the fields of a read_file request."""

    operation: str
    path: str


class ReadFileStruct(msgspec.Struct):
    """A msgspec Struct with the fields of a read_file request."""

    operation: str
    path: str


class CommandRequestSubclass(CommandRequest, frozen=True, kw_only=True):
    """A subclass of ``CommandRequest``; only the exact class is accepted."""


@dataclass
class CommandShape:
    """A dataclass with the fields of a command."""

    argv: list[str]


class HostileKey:
    """A dict key whose ``__hash__``/``__eq__`` record (and fail) once armed.

    It hashes like ``collides_with``, so any lookup of that name in a dict holding this key
    would have to compare against it, running caller code inside the dispatcher.
    """

    def __init__(self, collides_with: str) -> None:
        self._hash = hash(collides_with)
        self.armed = False
        self.consulted: list[str] = []

    def __hash__(self) -> int:
        if self.armed:
            self.consulted.append("__hash__")
            raise RuntimeError("caller code ran inside the dispatcher: __hash__")
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self.armed:
            self.consulted.append("__eq__")
            raise RuntimeError("caller code ran inside the dispatcher: __eq__")
        return self is other


class LookalikeSignal:
    """Quacks like an ``AbortSignal`` but was not made by this module."""

    aborted = False
    reason: object = None

    async def wait(self) -> None:
        await trio.sleep_forever()


class ClassForgingSignal(LookalikeSignal):
    """Claims to be an ``AbortSignal`` through ``__class__``, so ``isinstance`` believes it."""

    @property
    def __class__(self) -> type:  # pyright: ignore[reportIncompatibleMethodOverride]
        return AbortSignal


def half_built_signal() -> AbortSignal:
    """An instance of the exact class whose state was never initialised."""
    return object.__new__(AbortSignal)
