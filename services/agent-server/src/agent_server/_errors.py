"""The typed protocol errors of ``harness/acp/1`` (spec §3.3): one class per failure.

Each subclass fixes its JSON-RPC code and its ``ACP_*`` data code, so a raise site names the
failure and its message, never a pair of codes that could disagree.
"""

from __future__ import annotations

from typing import ClassVar, Final

__all__ = [
    "INTERNAL_ERROR",
    "INTERNAL_ERROR_MESSAGE",
    "AcpError",
    "InvalidParamsError",
    "InvalidRequestError",
    "ManifestRefusedError",
    "MethodNotFoundError",
    "NoRunningTurnError",
    "NotInitializedError",
    "ParseError",
    "PermissionNotFoundError",
    "PermissionResolvedError",
    "PrincipalQuotaError",
    "ProtocolVersionError",
    "RunTimeLimitError",
    "SandboxUnavailableError",
    "ServerSessionLimitError",
    "SessionAlreadyRunError",
    "SessionLimitError",
    "SessionNotContinuableError",
    "SessionNotFoundError",
    "SessionNotRestorableError",
    "SteeringRefusedError",
    "StorageFullError",
    "StoreUnavailableError",
    "store_unavailable_in",
]

INTERNAL_ERROR: Final = -32603
"""The code of every failure that is not an :class:`AcpError`; such frames carry no ``data``."""
INTERNAL_ERROR_MESSAGE: Final = "agent server request failed"


class AcpError(Exception):
    """A typed ``harness/acp/1`` error: the JSON-RPC ``code``, its ``ACP_*`` data code and a message.

    Raise one of the subclasses, which fix both codes; the three-argument form remains for
    callers outside this package.

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
        return (AcpError, (self.code, self.data_code, self.message))


class _AcpFailure(AcpError):
    """One failure of the protocol: the subclass names both codes and a default message."""

    CODE: ClassVar[int]
    DATA_CODE: ClassVar[str]
    DEFAULT_MESSAGE: ClassVar[str]

    def __init__(self, message: str | None = None) -> None:
        super().__init__(self.CODE, self.DATA_CODE, self.DEFAULT_MESSAGE if message is None else message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.message,))


class ParseError(_AcpFailure):
    """``-32700``: the frame is not JSON."""

    CODE, DATA_CODE, DEFAULT_MESSAGE = -32700, "ACP_PARSE_ERROR", "frame is not JSON"


class InvalidRequestError(_AcpFailure):
    """``-32600``: a bad envelope, a non-request, a second ``initialize``."""

    CODE, DATA_CODE, DEFAULT_MESSAGE = -32600, "ACP_INVALID_REQUEST", "invalid request"


class MethodNotFoundError(_AcpFailure):
    """``-32601``: an unknown method."""

    CODE, DATA_CODE, DEFAULT_MESSAGE = -32601, "ACP_METHOD_NOT_FOUND", "method not found"


class InvalidParamsError(_AcpFailure):
    """``-32602``: params, workspace, model, manifest, admission or restore cursor refused."""

    CODE, DATA_CODE, DEFAULT_MESSAGE = -32602, "ACP_INVALID_PARAMS", "invalid params"


class ManifestRefusedError(InvalidParamsError):
    """``-32602``: the task manifest cannot be trusted or read; ``reason`` says why.

    ``reason`` is a stable ``MANIFEST_*`` code, and the message starts with it:
    ``MANIFEST_MISSING``, ``MANIFEST_INVALID``, ``MANIFEST_ID_MISMATCH``,
    ``MANIFEST_NOT_COMMITTED`` (it exists only in the working tree), ``MANIFEST_MODIFIED``
    (the working tree's copy differs from the trusted base's, or is gone) and
    ``MANIFEST_BASE_UNAVAILABLE`` (the base commit cannot be read).
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.detail = message

    def __reduce__(self) -> tuple[object, ...]:
        return (ManifestRefusedError, (self.reason, self.detail))


class ProtocolVersionError(_AcpFailure):
    """``-32001``: ``protocolVersion`` is not ``harness/acp/1``."""

    CODE, DATA_CODE = -32001, "ACP_PROTOCOL_VERSION"
    DEFAULT_MESSAGE = "unsupported protocol version; this server speaks harness/acp/1"


class NotInitializedError(_AcpFailure):
    """``-32002``: a method before ``initialize``."""

    CODE, DATA_CODE, DEFAULT_MESSAGE = -32002, "ACP_NOT_INITIALIZED", "send initialize first"


class SessionNotFoundError(_AcpFailure):
    """``-32010``: the session is unknown to this connection, or (on restore) to its principal."""

    CODE, DATA_CODE, DEFAULT_MESSAGE = -32010, "ACP_SESSION_NOT_FOUND", "session not found"

    def __init__(self, session_id: str) -> None:
        super().__init__(f'session "{session_id}" not found')
        self.session_id = session_id

    def __reduce__(self) -> tuple[object, ...]:
        return (SessionNotFoundError, (self.session_id,))


class SessionAlreadyRunError(_AcpFailure):
    """``-32011``: a prompt on a session whose turn is running, or that has finished (issue #23)."""

    CODE, DATA_CODE, DEFAULT_MESSAGE = -32011, "ACP_SESSION_ALREADY_RUN", "session has already run"


class SessionLimitError(_AcpFailure):
    """``-32012``: the connection has created ``max_sessions_per_connection`` sessions."""

    CODE, DATA_CODE = -32012, "ACP_SESSION_LIMIT"
    DEFAULT_MESSAGE = "this connection has created its session limit"


class SessionNotRestorableError(_AcpFailure):
    """``-32013``: no store, foreign metadata, a live owner lease, a recovery conflict."""

    CODE, DATA_CODE, DEFAULT_MESSAGE = -32013, "ACP_SESSION_NOT_RESTORABLE", "session is not restorable"


class ServerSessionLimitError(_AcpFailure):
    """``-32014``: ``max_sessions`` sessions are live server-wide (issue #15)."""

    CODE, DATA_CODE = -32014, "ACP_SERVER_SESSION_LIMIT"
    DEFAULT_MESSAGE = "the server has reached its session limit"


class StorageFullError(_AcpFailure):
    """``-32015``: the store's file system has less than ``min_free_disk_bytes`` free (issue #15)."""

    CODE, DATA_CODE = -32015, "ACP_STORAGE_FULL"
    DEFAULT_MESSAGE = "the session store is out of disk space"


class PrincipalQuotaError(_AcpFailure):
    """``-32024``: the principal holds its share of live sessions, or of stored event bytes.

    ``max_sessions_per_principal`` live sessions (``session/new``, ``session/continue``), or
    at least ``max_stored_bytes_per_principal`` bytes of events kept in the store
    (``session/new``, ``session/prompt``, ``session/continue``); nothing was created or
    stored. Other principals are not affected; the message says which quota.
    """

    CODE, DATA_CODE, DEFAULT_MESSAGE = -32024, "ACP_PRINCIPAL_QUOTA", "the principal has reached its quota"


class RunTimeLimitError(_AcpFailure):
    """``-32016``: the run was stopped at ``max_run_ms`` (issue #15)."""

    CODE, DATA_CODE, DEFAULT_MESSAGE = -32016, "ACP_RUN_TIME_LIMIT", "the run was stopped at its time limit"


class SandboxUnavailableError(_AcpFailure):
    """``-32017``: the session's sandbox could not be made (issue #17); nothing was created.

    The message starts with the ``SANDBOX_*`` code (``SANDBOX_ENGINE_UNAVAILABLE``,
    ``SANDBOX_IMAGE_NOT_PINNED``, ``SANDBOX_START_FAILED``, ``SANDBOX_COPY_FAILED``,
    ``SANDBOX_DISK_LIMIT``) and says what is missing.
    """

    CODE, DATA_CODE, DEFAULT_MESSAGE = (
        -32017,
        "ACP_SANDBOX_UNAVAILABLE",
        "the session's sandbox is unavailable",
    )


class StoreUnavailableError(_AcpFailure):
    """``-32018``: the session store could not be reached (issue #22); the server keeps serving.

    Raised for a request whose store operation failed with ``SESS_UNAVAILABLE`` (the
    PostgreSQL store's lost connection or unreachable database). A prompt's run is aborted;
    what it stored before stays restorable; the request may be retried.
    """

    CODE, DATA_CODE, DEFAULT_MESSAGE = (
        -32018,
        "ACP_STORE_UNAVAILABLE",
        "the session store is unreachable; try again",
    )


class NoRunningTurnError(_AcpFailure):
    """``-32019``: ``session/steer`` on a session with no running turn (issue #23)."""

    CODE, DATA_CODE, DEFAULT_MESSAGE = -32019, "ACP_NO_RUNNING_TURN", "the session has no running turn"


class SteeringRefusedError(_AcpFailure):
    """``-32022``: the turn is ending (canceled, completing or just finished); nothing was stored.

    The text can go as the session's next prompt (issue #23).
    """

    CODE, DATA_CODE = -32022, "ACP_STEERING_REFUSED"
    DEFAULT_MESSAGE = "the turn is ending and takes no more steering; send the text as the next prompt"


class SessionNotContinuableError(_AcpFailure):
    """``-32023``: ``session/continue`` on a session with no interrupted turn to continue (issue #23).

    Its last turn ended, it never ran one, or the turn stored no runtime checkpoint (or an
    invalid one); the message says which.
    """

    CODE, DATA_CODE = -32023, "ACP_SESSION_NOT_CONTINUABLE"
    DEFAULT_MESSAGE = "the session has no interrupted turn to continue"


STORE_UNAVAILABLE_CODE: Final = "SESS_UNAVAILABLE"
"""The store error code of an unreachable store (harness-store-postgres's ``SESS_UNAVAILABLE``;
spelled here because that distribution is optional)."""


def store_unavailable_in(error: BaseException) -> bool:
    """Whether ``error`` or an error it was raised from is a store's ``SESS_UNAVAILABLE``."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if getattr(current, "code", None) == STORE_UNAVAILABLE_CODE:
            return True
        current = current.__cause__ or current.__context__
    return False


class PermissionNotFoundError(_AcpFailure):
    """``-32020``: the ``permissionId`` was never pending in that session."""

    CODE, DATA_CODE, DEFAULT_MESSAGE = -32020, "ACP_PERMISSION_NOT_FOUND", "permission is not pending"


class PermissionResolvedError(_AcpFailure):
    """``-32021``: the ``permissionId`` was already answered, timed out or denied by cancel or finish."""

    CODE, DATA_CODE = -32021, "ACP_PERMISSION_RESOLVED"
    DEFAULT_MESSAGE = "permission is already resolved"
