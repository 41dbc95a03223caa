"""Strict parsing of operation requests and validation of adapter results.

Both sides of an adapter call are untrusted data. Checks use exact built-in types
(``type(v) is dict``), never ``isinstance``, so a subclass cannot show the validator one
value and the adapter another, and every key's type is checked before any lookup so that no
caller code runs inside the dispatcher. The order of checks is part of the contract: one
input always yields one error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, final

from harness_workspace._errors import (
    WorkspaceOperationMalformedError,
    WorkspaceOperationRequiredError,
    WorkspaceOperationUnknownError,
)
from harness_workspace._exact import is_array, is_object
from harness_workspace._metadata import MAX_ARRAY_LENGTH, MAX_SAFE_INTEGER, normalize_metadata
from harness_workspace._signals import link_signal
from harness_workspace._types import WORKSPACE_CAPABILITIES, CommandRequest, CommandResult, WorkspaceSnapshot

__all__ = ["OPERATIONS", "OperationRule", "parse_request"]

_COMMAND_KEYS: Final = frozenset({"argv", "cwd", "timeout_ms", "signal"})
_COMMAND_RESULT_KEYS: Final = frozenset({"exit_code", "stdout", "stderr", "timed_out"})
_SNAPSHOT_KEYS: Final = frozenset({"id", "created_at", "metadata"})

_NO_ARGUMENTS: Final[tuple[object, ...]] = ()
_ABSENT: Final = object()


def _malformed(message: str, operation: str | None) -> WorkspaceOperationMalformedError:
    return WorkspaceOperationMalformedError(message, operation)


# ------------------------------------------------------------------ requests


def parse_request(request: object) -> tuple[OperationRule, tuple[object, ...]]:
    """Check a request envelope and its fields; return the operation's rule and its arguments.

    The arguments are fresh or immutable: strings are passed on as the same objects, and
    an ``execute`` command becomes a new :class:`CommandRequest` with a tuple ``argv`` and a
    freshly linked signal.

    Raises:
        WorkspaceOperationRequiredError: no request, or no operation name.
        WorkspaceOperationMalformedError: any shape violation, in the contract's order.
        WorkspaceOperationUnknownError: an operation name outside the vocabulary.
    """
    if request is None:
        raise WorkspaceOperationRequiredError("workspace operation is required")
    if not is_object(request):
        raise _malformed("workspace operation must be an object", None)
    for key in request:
        if type(key) is not str:
            raise _malformed("workspace operation contains a non-string key", None)
    # Every key is now an exact str, so lookups run no caller code.
    operation = request.get("operation")
    if operation is None:
        raise WorkspaceOperationRequiredError("workspace operation name is required")
    if type(operation) is not str or not operation:
        raise _malformed("workspace operation name must be a nonempty string", None)
    rule = OPERATIONS.get(operation)
    if rule is None:
        raise WorkspaceOperationUnknownError(operation)
    if not request.keys() <= rule.allowed_keys:
        for key in request:
            if key not in rule.allowed_keys:
                raise _malformed(f"workspace operation contains unexpected property {key!r}", operation)
    return rule, rule.parse_fields(request)


def _require_path(path: object, operation: str) -> str:
    if type(path) is not str or not path:
        raise _malformed(f"{operation}.path must be a nonempty string", operation)
    return path


def _read_file_fields(request: dict[object, object]) -> tuple[object, ...]:
    return (_require_path(request.get("path"), "read_file"),)


def _list_files_fields(request: dict[object, object]) -> tuple[object, ...]:
    return (_require_path(request.get("path"), "list_files"),)


def _write_file_fields(request: dict[object, object]) -> tuple[object, ...]:
    contents = request.get("contents")
    if type(contents) is not str:
        raise _malformed("write_file.contents must be a string", "write_file")
    return (_require_path(request.get("path"), "write_file"), contents)


def _execute_fields(request: dict[object, object]) -> tuple[object, ...]:
    return (_parse_command(request.get("command")),)


def _no_fields(request: dict[object, object]) -> tuple[object, ...]:
    return _NO_ARGUMENTS


def _parse_command(command: object) -> CommandRequest:
    if type(command) is CommandRequest:
        argv: object = command.argv
        cwd: object = command.cwd
        timeout_ms: object = command.timeout_ms
        signal: object = command.signal
    elif is_object(command):
        for key in command:
            if type(key) is not str:
                raise _malformed("execute.command must be an object", "execute")
        for key in command:
            if key not in _COMMAND_KEYS:
                raise _malformed(f"execute.command contains unexpected property {key!r}", "execute")
        argv = command.get("argv")
        cwd = command.get("cwd")
        timeout_ms = command.get("timeout_ms")
        signal = command.get("signal")
    else:
        raise _malformed("execute.command must be an object", "execute")

    checked_argv = _parse_argv(argv)
    if cwd is not None and (type(cwd) is not str or not cwd):
        raise _malformed("execute.command.cwd must be a nonempty string when provided", "execute")
    if timeout_ms is not None and (type(timeout_ms) is not int or not 0 <= timeout_ms <= MAX_SAFE_INTEGER):
        raise _malformed(
            "execute.command.timeout_ms must be a nonnegative safe integer when provided", "execute"
        )
    linked = None
    if signal is not None:
        try:
            linked = link_signal(signal)
        except TypeError as error:
            raise _malformed(
                "execute.command.signal must be a genuine AbortSignal when provided", "execute"
            ) from error
    return CommandRequest(argv=checked_argv, cwd=cwd, timeout_ms=timeout_ms, signal=linked)


def _parse_argv(argv: object) -> tuple[str, ...]:
    if not is_array(argv):
        raise _malformed("execute.command.argv must be an array", "execute")
    if len(argv) > MAX_ARRAY_LENGTH:
        raise _malformed("execute.command.argv length must be between 0 and 100000", "execute")
    # Copy before checking, so the checked items are exactly the ones passed on.
    items: tuple[object, ...] = tuple(argv)
    if not items:
        raise _malformed("execute.command.argv must contain a program", "execute")
    program = items[0]
    if type(program) is not str or not program:
        raise _malformed("execute.command.argv[0] must be a nonempty program string", "execute")
    for index in range(1, len(items)):
        if type(items[index]) is not str:
            raise _malformed(f"execute.command.argv[{index}] must be a string", "execute")
    return items  # type: ignore[return-value]  # every item was checked to be an exact str


# ------------------------------------------------------------------ results


def _text_result(operation: str) -> Callable[[object], object]:
    """The validator of an operation that returns text: the same ``str`` object, or MALFORMED."""

    def validate(result: object) -> object:
        if type(result) is not str:
            raise _malformed(f"{operation} returned a non-string result", operation)
        return result

    return validate


def _void_result(operation: str) -> Callable[[object], object]:
    """The validator of an operation that returns nothing: exactly ``None``, or MALFORMED."""

    def validate(result: object) -> object:
        if result is not None:
            raise _malformed(f"{operation} returned a non-void result", operation)
        return None

    return validate


def _validate_path_list(result: object) -> list[str]:
    if not is_array(result) or len(result) > MAX_ARRAY_LENGTH:
        raise _malformed("list_files returned a malformed path list", "list_files")
    paths: list[object] = list(result)
    for path in paths:
        if type(path) is not str:
            raise _malformed("list_files returned a malformed path list", "list_files")
    return paths  # type: ignore[return-value]  # every item was checked to be an exact str


def _read_record_fields(
    result: object, record_type: type, keys: frozenset[str], message: str, operation: str
) -> dict[str, object]:
    """Return a record's fields as a dict, from an exact record instance or an exact dict."""
    if type(result) is record_type:
        return {key: getattr(result, key) for key in keys}
    if not is_object(result):
        raise _malformed(message, operation)
    for key in result:
        if type(key) is not str or key not in keys:
            raise _malformed(message, operation)
    return result  # type: ignore[return-value]  # every key was checked to be an exact str


def _validate_command_result(result: object) -> CommandResult:
    fields = _read_record_fields(
        result, CommandResult, _COMMAND_RESULT_KEYS, "execute returned a malformed command result", "execute"
    )
    exit_code = fields.get("exit_code", _ABSENT)
    if exit_code is not None and (
        type(exit_code) is not int or not -MAX_SAFE_INTEGER <= exit_code <= MAX_SAFE_INTEGER
    ):
        raise _malformed("execute returned a command result with an invalid exit_code", "execute")
    stdout = fields.get("stdout")
    stderr = fields.get("stderr")
    if type(stdout) is not str or type(stderr) is not str:
        raise _malformed("execute returned a command result with invalid output", "execute")
    timed_out = fields.get("timed_out")
    if timed_out is not None and type(timed_out) is not bool:
        raise _malformed("execute returned a command result with an invalid timed_out flag", "execute")
    return CommandResult(exit_code=exit_code, stdout=stdout, stderr=stderr, timed_out=timed_out)


def _validate_snapshot(result: object) -> WorkspaceSnapshot:
    fields = _read_record_fields(
        result, WorkspaceSnapshot, _SNAPSHOT_KEYS, "snapshot returned a malformed snapshot", "snapshot"
    )
    snapshot_id = fields.get("id")
    if type(snapshot_id) is not str or not snapshot_id:
        raise _malformed("snapshot.id must be a nonempty string", "snapshot")
    created_at = fields.get("created_at")
    if type(created_at) is not str or not created_at:
        raise _malformed("snapshot.created_at must be a nonempty string", "snapshot")
    metadata = normalize_metadata(fields.get("metadata"))
    return WorkspaceSnapshot(id=snapshot_id, created_at=created_at, metadata=metadata)


# ------------------------------------------------------------------ the vocabulary


@final
class OperationRule:
    """Everything the dispatcher needs to know about one operation, looked up once per call."""

    __slots__ = ("allowed_keys", "index", "name", "parse_fields", "validate_result")

    def __init__(
        self,
        name: str,
        allowed_keys: frozenset[str],
        parse_fields: Callable[[dict[object, object]], tuple[object, ...]],
        validate_result: Callable[[object], object],
    ) -> None:
        self.name = name
        self.index = WORKSPACE_CAPABILITIES.index(name)
        self.allowed_keys = allowed_keys
        self.parse_fields = parse_fields
        self.validate_result = validate_result


OPERATIONS: Final[dict[str, OperationRule]] = {
    rule.name: rule
    for rule in (
        OperationRule(
            "read_file", frozenset({"operation", "path"}), _read_file_fields, _text_result("read_file")
        ),
        OperationRule(
            "write_file",
            frozenset({"operation", "path", "contents"}),
            _write_file_fields,
            _void_result("write_file"),
        ),
        OperationRule(
            "list_files", frozenset({"operation", "path"}), _list_files_fields, _validate_path_list
        ),
        OperationRule(
            "execute", frozenset({"operation", "command"}), _execute_fields, _validate_command_result
        ),
        OperationRule("diff", frozenset({"operation"}), _no_fields, _text_result("diff")),
        OperationRule("snapshot", frozenset({"operation"}), _no_fields, _validate_snapshot),
        OperationRule("dispose", frozenset({"operation"}), _no_fields, _void_result("dispose")),
    )
}
"""The seven operations, in canonical order."""
