"""The seams between the parts of this package: one SSE event, the transport port, the
retry policy and the API key. Data and protocols only; the behaviour lives in ``_sse``,
``_transport``, ``_retry`` and the two adapters."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Final, NoReturn, Protocol, cast

import msgspec

from harness_models._errors import MODEL_CONFIG_INVALID, ModelError

__all__ = [
    "ApiKey",
    "RetryPolicy",
    "SseEvent",
    "SseTransport",
    "StreamLimits",
    "Timeouts",
    "checked_extra_headers",
    "plain_json",
]


class SseEvent(msgspec.Struct, frozen=True):
    """One dispatched server-sent event: its type (``message`` by default) and its data."""

    event: str = "message"
    data: str = ""
    id: str | None = None


class SseTransport(Protocol):
    """Opens one streaming POST and yields its server-sent events.

    Entering the context sends the request and checks the status: an error status raises a
    :class:`~harness_models.ModelError` (with ``retry_after_s`` from ``Retry-After`` /
    ``retry-after-ms``). Iterating yields events as they arrive; a dropped connection, a
    timeout or malformed framing raises a ``ModelError``. Leaving the context closes the
    connection at once (also when the caller is cancelled).
    """

    def stream(
        self, url: str, *, headers: Mapping[str, str], body: bytes
    ) -> AbstractAsyncContextManager[AsyncIterator[SseEvent]]:
        """Open the stream of one request."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeouts:
    """Seconds: to connect, between two reads of the stream, and for a whole attempt."""

    connect_s: float = 10.0
    read_s: float = 120.0
    total_s: float = 600.0

    def __post_init__(self) -> None:
        for name in ("connect_s", "read_s", "total_s"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not 0 < value <= 86_400:
                raise ValueError(f"{name} must be a number of seconds in (0, 86400], got {value!r}")


_MIB: Final = 1_048_576


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamLimits:
    """How much one model response may carry; crossing a limit is ``MODEL_STREAM_TOO_LARGE``.

    Each is checked as the data arrives, before it is kept, so a provider that streams without
    end costs at most a limit plus one chunk of memory. The defaults sit far above any real
    answer (a 128k-token answer is about 0.5 MiB of text, 130 000 events and 25 MiB on the
    wire).

    Attributes:
        max_text_bytes: The UTF-8 bytes of the answer's text, all deltas together.
        max_argument_bytes: The UTF-8 bytes of every tool call's arguments together.
        max_events: The server-sent events of the response (each text delta costs the
            runtime, the store and the client an event of its own, however short).
        max_response_bytes: The bytes of the whole response body (framing, pings and
            comments included), for the HTTP transport an adapter makes itself.
    """

    max_text_bytes: int = 8 * _MIB
    max_argument_bytes: int = 4 * _MIB
    max_events: int = 262_144
    max_response_bytes: int = 64 * _MIB

    def __post_init__(self) -> None:
        for name in ("max_text_bytes", "max_argument_bytes", "max_events", "max_response_bytes"):
            value = getattr(self, name)
            if type(value) is not int or not 1 <= value <= 1024 * _MIB:
                raise ValueError(f"{name} must be an int in [1, 2**30], got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """How failed attempts are retried: only retryable errors, only before the first frame.

    Attributes:
        max_attempts: Attempts in all (1 = no retry).
        base_delay_s: The first backoff; each next one doubles, up to ``max_delay_s``,
            with full jitter; a provider's ``Retry-After`` wins when it is longer.
        max_delay_s: The longest single wait.
        max_total_s: No new attempt starts once this long has passed since the first.
    """

    max_attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    max_total_s: float = 120.0

    def __post_init__(self) -> None:
        if type(self.max_attempts) is not int or not 1 <= self.max_attempts <= 20:
            raise ValueError(f"max_attempts must be an int of 1..20, got {self.max_attempts!r}")
        for name in ("base_delay_s", "max_delay_s", "max_total_s"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not 0 <= value <= 3_600:
                raise ValueError(f"{name} must be a number of seconds in [0, 3600], got {value!r}")


_HIDDEN: Final = "ApiKey(<hidden>)"


class ApiKey:
    """A provider API key that never shows itself: not in ``repr``, ``str``, logs or pickles.

    Only :meth:`reveal` gives the value, for the one request header that needs it.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if type(value) is not str or not value.strip() or any(ord(c) < 0x21 or ord(c) > 0x7E for c in value):
            raise ValueError("an API key must be non-empty printable ASCII without spaces")
        self._value = value

    def reveal(self) -> str:
        """The key itself, for the request header."""
        return self._value

    def __repr__(self) -> str:
        return _HIDDEN

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        raise TypeError("an ApiKey cannot be pickled")

    def __eq__(self, other: object) -> bool:
        return type(other) is ApiKey and other._value == self._value

    def __hash__(self) -> int:
        return hash((ApiKey, self._value))


def plain_json(value: object) -> object:
    """msgspec's ``enc_hook`` for the kernel's frozen JSON: read-only mappings and sequences
    (``FrozenDict``, ``FrozenList`` in tool schemas and arguments) as plain containers."""
    if isinstance(value, Mapping):
        return dict(cast("Mapping[object, object]", value))
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return list(cast("Sequence[object]", value))
    raise TypeError(f"cannot encode a {type(value).__name__} as JSON")


_HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE: Final = re.compile(r"[\t\x20-\x7e\x80-\xff]*")
_ALWAYS_OWN: Final = frozenset({"content-type", "accept", "content-length", "host"})


def checked_extra_headers(extra: Mapping[str, str] | None, own: frozenset[str]) -> dict[str, str]:
    """An operator's extra request headers, checked: valid names and values (no CR or LF can
    split a header), none of ``own`` (lower-case; the adapter's own) nor the framing headers.

    Raises:
        ModelError: ``MODEL_CONFIG_INVALID``; a value is never echoed (it may be a secret).
    """
    headers: dict[str, str] = {}
    for name, value in (extra or {}).items():
        if type(name) is not str or not _HEADER_NAME.fullmatch(name):
            raise ModelError(MODEL_CONFIG_INVALID, f"extra header name {name!r} is not a valid header name")
        if name.lower() in own or name.lower() in _ALWAYS_OWN:
            raise ModelError(MODEL_CONFIG_INVALID, f"extra header {name!r} is set by the adapter")
        if type(value) is not str or not _HEADER_VALUE.fullmatch(value):
            raise ModelError(
                MODEL_CONFIG_INVALID, f"extra header {name!r} has a value that is not a valid header value"
            )
        headers[name] = value
    return headers
