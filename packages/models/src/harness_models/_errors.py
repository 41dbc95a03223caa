"""Typed model errors: a stable code, a ``retryable`` flag, and never a secret in the message."""

from __future__ import annotations

from typing import Final

__all__ = [
    "MODEL_AUTH_FAILED",
    "MODEL_BAD_REQUEST",
    "MODEL_CONFIG_INVALID",
    "MODEL_CONNECTION_FAILED",
    "MODEL_ERROR_CODES",
    "MODEL_NOT_FOUND",
    "MODEL_OVERLOADED",
    "MODEL_PROVIDER_ERROR",
    "MODEL_RATE_LIMITED",
    "MODEL_SERVER_ERROR",
    "MODEL_STREAM_INVALID",
    "MODEL_STREAM_TOO_LARGE",
    "MODEL_TIMEOUT",
    "MODEL_TOOL_ARGUMENTS_INVALID",
    "ModelError",
]

MODEL_BAD_REQUEST: Final = "MODEL_BAD_REQUEST"
"""400 or 422: the provider refused the request as written (never retried)."""
MODEL_AUTH_FAILED: Final = "MODEL_AUTH_FAILED"
"""401 or 403: the key is missing, wrong or not allowed (never retried)."""
MODEL_NOT_FOUND: Final = "MODEL_NOT_FOUND"
"""404: no such model or endpoint (never retried)."""
MODEL_RATE_LIMITED: Final = "MODEL_RATE_LIMITED"
"""429 (and 409): too many requests; retried after ``Retry-After``."""
MODEL_OVERLOADED: Final = "MODEL_OVERLOADED"
"""529 or an ``overloaded_error``: the provider is busy; retried."""
MODEL_SERVER_ERROR: Final = "MODEL_SERVER_ERROR"
"""Any other 5xx; retried."""
MODEL_TIMEOUT: Final = "MODEL_TIMEOUT"
"""408, or a connect, read or whole-request timeout; retried."""
MODEL_CONNECTION_FAILED: Final = "MODEL_CONNECTION_FAILED"
"""The connection failed or dropped (mid-stream too); retried only before the first frame."""
MODEL_STREAM_INVALID: Final = "MODEL_STREAM_INVALID"
"""The provider's stream is not valid server-sent events or JSON of the documented shape."""
MODEL_STREAM_TOO_LARGE: Final = "MODEL_STREAM_TOO_LARGE"
"""One response went past a size limit (its text, its tool-call arguments, one SSE line or
event, or its whole body); raised as the limit is crossed, never retried."""
MODEL_TOOL_ARGUMENTS_INVALID: Final = "MODEL_TOOL_ARGUMENTS_INVALID"
"""A tool call's argument fragments do not form a JSON object."""
MODEL_PROVIDER_ERROR: Final = "MODEL_PROVIDER_ERROR"
"""An ``error`` event in the stream, or an error status this table does not name."""
MODEL_CONFIG_INVALID: Final = "MODEL_CONFIG_INVALID"
"""The adapter's configuration is unusable (no key, a plain-http remote URL, a bad timeout)."""

MODEL_ERROR_CODES: Final = frozenset(
    {
        MODEL_BAD_REQUEST,
        MODEL_AUTH_FAILED,
        MODEL_NOT_FOUND,
        MODEL_RATE_LIMITED,
        MODEL_OVERLOADED,
        MODEL_SERVER_ERROR,
        MODEL_TIMEOUT,
        MODEL_CONNECTION_FAILED,
        MODEL_STREAM_INVALID,
        MODEL_STREAM_TOO_LARGE,
        MODEL_TOOL_ARGUMENTS_INVALID,
        MODEL_PROVIDER_ERROR,
        MODEL_CONFIG_INVALID,
    }
)


class ModelError(Exception):
    """A model provider failure with a stable ``code`` and whether retrying may help.

    The message is built by this package from the status, the provider's error type and a
    bounded excerpt of its error text; it never carries a request header (the key).

    Args:
        code: One of :data:`MODEL_ERROR_CODES`.
        message: Human-readable text.
        retryable: Whether a new attempt may succeed.
        status: The HTTP status, when there was one.
        retry_after_s: The provider's ``Retry-After`` / ``retry-after-ms`` hint, in seconds.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        if code not in MODEL_ERROR_CODES:
            raise ValueError(f"unknown model error code {code!r}")
        super().__init__(message)
        self.code = code
        self.retryable = retryable
        self.status = status
        self.retry_after_s = retry_after_s

    @property
    def message(self) -> str:
        """The human-readable message, identical to ``str(error)``."""
        return str(self.args[0]) if self.args else ""

    def __repr__(self) -> str:
        return f"ModelError(code={self.code!r}, message={self.message!r}, retryable={self.retryable!r})"
