"""One error class per failure of ``harness/acp/1`` (spec §3.3), each fixing both of its codes."""

from __future__ import annotations

import pickle

import pytest

from agent_server import AcpError
from agent_server._errors import (
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    NoRunningTurnError,
    NotInitializedError,
    ParseError,
    PermissionNotFoundError,
    PermissionResolvedError,
    PrincipalQuotaError,
    ProtocolVersionError,
    RunTimeLimitError,
    ServerSessionLimitError,
    SessionAlreadyRunError,
    SessionLimitError,
    SessionNotContinuableError,
    SessionNotFoundError,
    SessionNotRestorableError,
    SteeringRefusedError,
    StorageFullError,
    StoreUnavailableError,
    store_unavailable_in,
)

TABLE = [
    (ParseError, -32700, "ACP_PARSE_ERROR"),
    (InvalidRequestError, -32600, "ACP_INVALID_REQUEST"),
    (MethodNotFoundError, -32601, "ACP_METHOD_NOT_FOUND"),
    (InvalidParamsError, -32602, "ACP_INVALID_PARAMS"),
    (ProtocolVersionError, -32001, "ACP_PROTOCOL_VERSION"),
    (NotInitializedError, -32002, "ACP_NOT_INITIALIZED"),
    (SessionAlreadyRunError, -32011, "ACP_SESSION_ALREADY_RUN"),
    (SessionLimitError, -32012, "ACP_SESSION_LIMIT"),
    (SessionNotRestorableError, -32013, "ACP_SESSION_NOT_RESTORABLE"),
    (ServerSessionLimitError, -32014, "ACP_SERVER_SESSION_LIMIT"),
    (StorageFullError, -32015, "ACP_STORAGE_FULL"),
    (RunTimeLimitError, -32016, "ACP_RUN_TIME_LIMIT"),
    (StoreUnavailableError, -32018, "ACP_STORE_UNAVAILABLE"),
    (NoRunningTurnError, -32019, "ACP_NO_RUNNING_TURN"),
    (PermissionNotFoundError, -32020, "ACP_PERMISSION_NOT_FOUND"),
    (PermissionResolvedError, -32021, "ACP_PERMISSION_RESOLVED"),
    (SteeringRefusedError, -32022, "ACP_STEERING_REFUSED"),
    (SessionNotContinuableError, -32023, "ACP_SESSION_NOT_CONTINUABLE"),
    (PrincipalQuotaError, -32024, "ACP_PRINCIPAL_QUOTA"),
]


@pytest.mark.parametrize(("kind", "code", "data_code"), TABLE)
def test_each_failure_class_fixes_its_codes_and_survives_pickling(
    kind: type[AcpError], code: int, data_code: str
) -> None:
    error = kind("a message")  # pyright: ignore[reportCallIssue]
    assert isinstance(error, AcpError)
    assert (error.code, error.data_code, error.message) == (code, data_code, "a message")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is kind
    assert (copy.code, copy.data_code, copy.message) == (code, data_code, "a message")
    assert kind().message  # every failure has a default message  # pyright: ignore[reportCallIssue]


def test_codes_are_unique_and_the_session_not_found_message_names_the_id() -> None:
    assert len({code for _, code, _ in TABLE}) == len(TABLE)
    error = SessionNotFoundError("sess-1")
    assert (error.code, error.data_code, error.message) == (
        -32010,
        "ACP_SESSION_NOT_FOUND",
        'session "sess-1" not found',
    )
    assert pickle.loads(pickle.dumps(error)).message == error.message
    plain = AcpError(-32099, "ACP_CUSTOM", "kept for callers outside the package")
    assert type(pickle.loads(pickle.dumps(plain))) is AcpError


def test_an_unreachable_store_is_found_through_the_chain_of_causes() -> None:
    class Outage(Exception):
        code = "SESS_UNAVAILABLE"

    class Other(Exception):
        code = "SESS_NOT_FOUND"

    wrapped = RuntimeError("a session event was not stored")
    wrapped.__cause__ = Outage("connection lost")
    assert store_unavailable_in(wrapped)
    implicit = RuntimeError("while handling")
    implicit.__context__ = Outage("connection lost")
    assert store_unavailable_in(implicit)
    assert not store_unavailable_in(Other("no such session"))
    assert not store_unavailable_in(RuntimeError("plain"))
    looped = RuntimeError("a")
    looped.__context__ = RuntimeError("b")
    looped.__context__.__context__ = looped
    assert not store_unavailable_in(looped)
