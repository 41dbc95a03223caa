"""The typed protocol error and the JSON-RPC error codes of ``harness/acp/1`` (spec §3.3)."""

from __future__ import annotations

from typing import Final

__all__ = [
    "INTERNAL_ERROR",
    "INTERNAL_ERROR_MESSAGE",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "NOT_INITIALIZED",
    "PARSE_ERROR",
    "PERMISSION_NOT_FOUND",
    "PERMISSION_RESOLVED",
    "PROTOCOL_VERSION_MISMATCH",
    "RUN_TIME_LIMIT",
    "SERVER_SESSION_LIMIT",
    "SESSION_ALREADY_RUN",
    "SESSION_LIMIT",
    "SESSION_NOT_FOUND",
    "SESSION_NOT_RESTORABLE",
    "STORAGE_FULL",
    "AcpError",
    "invalid_params",
    "session_not_found",
]

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
PROTOCOL_VERSION_MISMATCH: Final = -32001
NOT_INITIALIZED: Final = -32002
SESSION_NOT_FOUND: Final = -32010
SESSION_ALREADY_RUN: Final = -32011
SESSION_LIMIT: Final = -32012
SESSION_NOT_RESTORABLE: Final = -32013
SERVER_SESSION_LIMIT: Final = -32014
STORAGE_FULL: Final = -32015
RUN_TIME_LIMIT: Final = -32016
PERMISSION_NOT_FOUND: Final = -32020
PERMISSION_RESOLVED: Final = -32021

INTERNAL_ERROR_MESSAGE: Final = "agent server request failed"


class AcpError(Exception):
    """A typed ``harness/acp/1`` error: the JSON-RPC ``code``, its ``ACP_*`` data code and a message.

    Args:
        code: The JSON-RPC error code (for example ``-32602``).
        data_code: The stable ``ACP_*`` code sent as ``error.data.code``.
        message: Text for people; it may change between releases.
    """

    code: int
    data_code: str
    message: str

    def __init__(self, code: int, data_code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.data_code = data_code
        self.message = message

    def __repr__(self) -> str:
        return f"AcpError(code={self.code}, data_code={self.data_code!r}, message={self.message!r})"

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.code, self.data_code, self.message))


def invalid_params(message: str = "invalid params") -> AcpError:
    """An ``ACP_INVALID_PARAMS`` error (``-32602``)."""
    return AcpError(INVALID_PARAMS, "ACP_INVALID_PARAMS", message)


def session_not_found(session_id: str) -> AcpError:
    """An ``ACP_SESSION_NOT_FOUND`` error (``-32010``)."""
    return AcpError(SESSION_NOT_FOUND, "ACP_SESSION_NOT_FOUND", f'session "{session_id}" not found')
