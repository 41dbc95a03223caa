"""``harness/acp/1`` envelopes, strict params and results (spec §3).

Frames are decoded in two stages: :func:`parse_request` checks the JSON text and the
JSON-RPC envelope (duplicate keys, ``NaN``, ids, extra keys), then :func:`decode_params`
converts ``params`` into a strict Struct. UTF-8 byte limits and safe-integer bounds are
checked in each Struct's ``__post_init__``, which msgspec reports as a validation error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Annotated, Final, Literal, TypeAlias, TypeVar

import msgspec

from agent_server._errors import (
    INTERNAL_ERROR,
    INTERNAL_ERROR_MESSAGE,
    AcpError,
    InvalidParamsError,
    InvalidRequestError,
    ParseError,
)

__all__ = [
    "PROTOCOL_VERSION",
    "CancelParams",
    "CancelResult",
    "Capabilities",
    "CloseParams",
    "CloseResult",
    "ContinueParams",
    "InitializeParams",
    "InitializeResult",
    "JsonValue",
    "NewSessionParams",
    "NewSessionResult",
    "PermissionRespondParams",
    "PermissionRespondResult",
    "PromptParams",
    "PromptResult",
    "PromptUsage",
    "Request",
    "RequestId",
    "RestoreParams",
    "RestoreResult",
    "ServerCapabilities",
    "SteerParams",
    "SteerResult",
    "decode_params",
    "encode_error",
    "encode_notification",
    "encode_result",
    "parse_request",
    "utf8_size",
]

PROTOCOL_VERSION: Final = "harness/acp/1"

MAX_SAFE_INTEGER: Final = 2**53 - 1
_MAX_ID_BYTES: Final = 256
_MAX_METHOD_BYTES: Final = 128
_ENVELOPE_KEYS: Final = frozenset({"jsonrpc", "id", "method", "params"})
_TASK_ID: Final = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*", re.ASCII)

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
"""Arbitrary JSON data."""

RequestId: TypeAlias = str | int
"""A request id: a string of at most 256 UTF-8 bytes or a safe integer."""

SafeInt = Annotated[int, msgspec.Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
PositiveInt = Annotated[int, msgspec.Meta(ge=1, le=MAX_SAFE_INTEGER)]


def utf8_size(text: str) -> int:
    """The UTF-8 size of ``text``; a lone surrogate raises ``ValueError``."""
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError("text is not valid Unicode") from None


def _check_size(value: str | None, name: str, low: int, high: int) -> None:
    if value is not None and not low <= utf8_size(value) <= high:
        raise ValueError(f"{name} must be {low}..{high} UTF-8 bytes")


class _Params(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """Base of every params Struct: strict, camelCase on the wire."""


class Capabilities(_Params, frozen=True):
    """The client's capabilities in ``initialize``."""

    streaming: bool | None = None
    permissioning: bool | None = None
    sessions: bool | None = None


class InitializeParams(_Params, frozen=True):
    """``initialize`` params."""

    protocol_version: str
    client_name: str
    client_version: str | None = None
    capabilities: Capabilities = msgspec.field(default_factory=Capabilities)

    def __post_init__(self) -> None:
        _check_size(self.protocol_version, "protocolVersion", 1, 128)
        _check_size(self.client_name, "clientName", 1, 128)
        _check_size(self.client_version, "clientVersion", 0, 64)


class NewSessionParams(_Params, frozen=True):
    """``session/new`` params."""

    workspace: str
    task_id: str | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        _check_size(self.workspace, "workspace", 1, 4096)
        if self.task_id is not None and (len(self.task_id) > 128 or not _TASK_ID.fullmatch(self.task_id)):
            raise ValueError("taskId must be kebab-case of at most 128 characters")
        _check_size(self.model, "model", 1, 256)


class _SessionParams(_Params, frozen=True):
    session_id: str

    def __post_init__(self) -> None:
        _check_size(self.session_id, "sessionId", 1, 256)


class PromptParams(_SessionParams, frozen=True):
    """``session/prompt`` params."""

    content: str
    max_model_tokens: PositiveInt | None = None
    max_tool_calls: PositiveInt | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_size(self.content, "content", 1, 512 * 1024)


class PermissionRespondParams(_SessionParams, frozen=True):
    """``permission/respond`` params."""

    permission_id: str
    decision: Literal["allow", "deny"]
    note: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_size(self.permission_id, "permissionId", 1, 256)
        _check_size(self.note, "note", 0, 4096)


class CancelParams(_SessionParams, frozen=True):
    """``session/cancel`` params."""


class SteerParams(_SessionParams, frozen=True):
    """``session/steer`` params (issue #23)."""

    content: str

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_size(self.content, "content", 1, 256 * 1024)


class CloseParams(_SessionParams, frozen=True):
    """``session/close`` params (issue #23)."""


class ContinueParams(_SessionParams, frozen=True):
    """``session/continue`` params (issue #23).

    ``resend_uncertain``: a model request stored without its answer is sent again (under a
    new id) instead of ending the turn failed (kernel.md §8.16).
    """

    resend_uncertain: bool = False


class RestoreParams(_SessionParams, frozen=True):
    """``session/restore`` params."""

    after_seq: Annotated[int, msgspec.Meta(ge=-1, le=MAX_SAFE_INTEGER)]
    limit: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 128


class _Result(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Base of every result Struct."""


class ServerCapabilities(_Result, frozen=True):
    """What the server supports."""

    streaming: bool
    permissioning: bool
    sessions: bool


class InitializeResult(_Result, frozen=True):
    """``initialize`` result."""

    protocol_version: str
    agent_name: str
    agent_version: str
    capabilities: ServerCapabilities
    models: list[str]


class NewSessionResult(_Result, frozen=True):
    """``session/new`` result."""

    session_id: str


class PromptUsage(_Result, frozen=True):
    """The session's token usage at the end of the turn (cumulative over its turns, issue #23);
    ``total_tokens`` is prompt + completion."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class PromptResult(_Result, frozen=True):
    """``session/prompt`` result; ``events`` is always empty (the stream carries them)."""

    status: Literal["completed", "failed"]
    events: list[JsonValue]
    final_text: str
    usage: PromptUsage


class PermissionRespondResult(_Result, frozen=True):
    """``permission/respond`` result."""

    accepted: bool


class CancelResult(_Result, frozen=True):
    """``session/cancel`` result."""

    canceled: bool


class SteerResult(_Result, frozen=True):
    """``session/steer`` result: the id of the stored steering message."""

    message_id: str


class CloseResult(_Result, frozen=True):
    """``session/close`` result: whether this call ended the session."""

    closed: bool


class RestoreResult(_Result, frozen=True):
    """``session/restore`` result."""

    session_id: str
    status: Literal["completed", "interrupted"]
    replayed_from_seq: int
    replayed_through_seq: int
    replayed_events: int
    has_more: bool


@dataclass(frozen=True, slots=True)
class Request:
    """A valid JSON-RPC request: its id, method and raw params object."""

    id: RequestId
    method: str
    params: dict[str, object]


class _DuplicateKeyError(ValueError):
    pass


class _NonFiniteError(ValueError):
    pass


def _unique_object(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result: dict[str, object] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKeyError(key)
        result[key] = value
    return result


def _refuse_constant(name: str) -> object:
    raise _NonFiniteError(name)


def _valid_id(value: object) -> RequestId | None:
    if type(value) is str:
        try:
            return value if utf8_size(value) <= _MAX_ID_BYTES else None
        except ValueError:
            return None
    if type(value) is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return value
    return None


def _envelope_error(message: str, request_id: RequestId | None) -> tuple[AcpError, RequestId | None]:
    return InvalidRequestError(message), request_id


def parse_request(text: str) -> Request | tuple[AcpError, RequestId | None]:
    """Parse one text frame into a :class:`Request`, or the error to answer and the id to answer it with."""
    try:
        document: object = json.loads(text, object_pairs_hook=_unique_object, parse_constant=_refuse_constant)
    except _DuplicateKeyError:
        return _envelope_error("duplicate keys are not allowed", None)
    except (ValueError, RecursionError):
        return ParseError(), None
    if type(document) is not dict:
        return _envelope_error("a request must be a JSON object", None)
    raw: dict[str, object] = document  # pyright: ignore[reportUnknownVariableType]
    request_id = _valid_id(raw.get("id"))
    if "method" not in raw or "id" not in raw:
        return _envelope_error("ACP clients must send JSON-RPC requests", request_id)
    if raw.keys() - _ENVELOPE_KEYS or raw.get("jsonrpc") != "2.0" or type(raw.get("jsonrpc")) is not str:
        return _envelope_error("invalid JSON-RPC request envelope", request_id)
    if request_id is None:
        return _envelope_error("invalid request id", None)
    method = raw["method"]
    if type(method) is not str or _valid_id(method) is None or utf8_size(method) > _MAX_METHOD_BYTES:
        return _envelope_error("invalid method", request_id)
    params = raw.get("params", {})
    if type(params) is not dict:
        return InvalidParamsError("params must be an object"), request_id
    return Request(request_id, method, params)  # pyright: ignore[reportUnknownArgumentType]


_P = TypeVar("_P", bound=_Params)


def decode_params(params: dict[str, object], kind: type[_P]) -> _P:
    """Convert raw params into the strict Struct ``kind``.

    Raises:
        AcpError: ``-32602``; schema details are never echoed back.
    """
    try:
        return msgspec.convert(params, kind, strict=True)
    except msgspec.ValidationError:
        raise InvalidParamsError() from None


_encoder: Final = msgspec.json.Encoder()


def encode_result(request_id: RequestId, result: msgspec.Struct) -> str:
    """The text of a success response."""
    return _encoder.encode({"jsonrpc": "2.0", "id": request_id, "result": result}).decode()


def encode_error(request_id: RequestId | None, error: AcpError | None) -> str:
    """The text of an error response; ``None`` is the generic internal failure without ``data``."""
    body: dict[str, object]
    if error is None:
        body = {"code": INTERNAL_ERROR, "message": INTERNAL_ERROR_MESSAGE}
    else:
        body = {"code": error.code, "message": error.message, "data": {"code": error.data_code}}
    return _encoder.encode({"jsonrpc": "2.0", "id": request_id, "error": body}).decode()


def encode_notification(session_id: str, seq: int, event_json: bytes) -> str:
    """The text of a ``session/event`` notification; ``event_json`` is the serialized event."""
    params = {"sessionId": session_id, "seq": seq, "event": msgspec.Raw(event_json)}
    return _encoder.encode({"jsonrpc": "2.0", "method": "session/event", "params": params}).decode()
