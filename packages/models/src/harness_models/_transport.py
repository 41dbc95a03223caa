"""The HTTP transport: one streaming POST over httpx (on trio, through anyio), its SSE events.

Timeouts: httpx enforces the connect and the between-reads timeouts; the whole-attempt
deadline is an absolute trio deadline applied to every await this module makes (connect,
send, each read), never a cancel scope held open across a ``yield``: the adapters are async
generators that yield frames from inside ``stream()``, and a scope spanning their yield
would cancel whatever the runtime does meanwhile. Leaving the context closes the response
in a shielded, bounded scope, so a cancelled caller still hangs up at once.

Error messages are built here from the status, the provider's error type and a bounded
excerpt of its message; a request header value is never put into one (values that the
provider echoes back are blanked).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from email.utils import parsedate_to_datetime
from typing import Final, Self

import httpx
import msgspec
import trio

from harness_models._errors import (
    MODEL_AUTH_FAILED,
    MODEL_BAD_REQUEST,
    MODEL_CONNECTION_FAILED,
    MODEL_NOT_FOUND,
    MODEL_OVERLOADED,
    MODEL_PROVIDER_ERROR,
    MODEL_RATE_LIMITED,
    MODEL_SERVER_ERROR,
    MODEL_STREAM_INVALID,
    MODEL_STREAM_TOO_LARGE,
    MODEL_TIMEOUT,
    ModelError,
)
from harness_models._sse import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_LINE_BYTES, SseParser
from harness_models._wire import SseEvent, StreamLimits, Timeouts

__all__ = ["MAX_ERROR_MESSAGE_CHARS", "HttpSseTransport", "error_for_status", "retry_after_s"]

MAX_ERROR_MESSAGE_CHARS: Final = 1_000
"""The longest message an HTTP error status produces."""
_MAX_ERROR_BODY_BYTES: Final = 64 * 1024
_CLOSE_GRACE_S: Final = 1.0
_STATUS_CODES: Final[Mapping[int, tuple[str, bool]]] = {
    400: (MODEL_BAD_REQUEST, False),
    422: (MODEL_BAD_REQUEST, False),
    401: (MODEL_AUTH_FAILED, False),
    403: (MODEL_AUTH_FAILED, False),
    404: (MODEL_NOT_FOUND, False),
    408: (MODEL_TIMEOUT, True),
    409: (MODEL_RATE_LIMITED, True),
    429: (MODEL_RATE_LIMITED, True),
    529: (MODEL_OVERLOADED, True),
}


class _ErrorDetail(msgspec.Struct):
    type: str | None = None
    message: str | None = None
    code: str | int | None = None


class _ErrorBody(msgspec.Struct):
    # OpenAI: {"error": {"message", "type", "code"}}; Anthropic: {"type": "error", "error": {...}}.
    error: _ErrorDetail | str | None = None


_ERROR_BODY_DECODER: Final = msgspec.json.Decoder(_ErrorBody)


def retry_after_s(headers: httpx.Headers, *, now: float | None = None) -> float | None:
    """The provider's wait hint in seconds: ``retry-after-ms``, else ``Retry-After``.

    ``Retry-After`` may be seconds or an HTTP date (measured against ``now``, the Unix time).
    A hint that is malformed, negative or not finite is ignored.
    """
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        value = _finite(milliseconds)
        if value is not None:
            return value / 1000
    text = headers.get("retry-after")
    if text is None:
        return None
    value = _finite(text)
    if value is not None:
        return value
    try:
        moment = parsedate_to_datetime(text.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        return None
    return max(0.0, moment.timestamp() - (time.time() if now is None else now))


def _finite(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _printable(text: str) -> str:
    return "".join(ch if ch.isprintable() else " " for ch in text)


def error_for_status(
    status: int, headers: httpx.Headers, body: bytes, *, secrets: tuple[str, ...] = ()
) -> ModelError:
    """The :class:`ModelError` an HTTP error status stands for.

    Args:
        status: The response status.
        headers: The response headers (for the retry hint).
        body: The start of the error body (JSON in the OpenAI or Anthropic shape, or not).
        secrets: Strings that must not appear in the message (the request's header values).
    """
    error_type: str | None = None
    error_message: str | None = None
    try:
        detail = _ERROR_BODY_DECODER.decode(body).error
    except msgspec.DecodeError:
        detail = None
    if isinstance(detail, _ErrorDetail):
        error_type = detail.type or (str(detail.code) if detail.code is not None else None)
        error_message = detail.message
    elif isinstance(detail, str):
        error_message = detail
    if error_type == "overloaded_error":
        code, retryable = MODEL_OVERLOADED, True
    elif status in _STATUS_CODES:
        code, retryable = _STATUS_CODES[status]
    elif 500 <= status <= 599:
        code, retryable = MODEL_SERVER_ERROR, True
    else:
        code, retryable = MODEL_PROVIDER_ERROR, False
    message = f"the provider answered HTTP {status}"
    if error_type:
        message += f" ({error_type})"
    if error_message:
        message += f": {error_message}"
    # A header value and each word of it ("Bearer <key>": providers echo the bare key back);
    # longest first, so a value is hidden whole before its parts. Short values (a version,
    # "application/json") are not secrets.
    hidden = {part for secret in secrets for part in (secret, *secret.split()) if len(part) >= 8}
    for secret in sorted(hidden, key=len, reverse=True):
        message = message.replace(secret, "<redacted>")
    message = _printable(message)
    if len(message) > MAX_ERROR_MESSAGE_CHARS:
        message = message[: MAX_ERROR_MESSAGE_CHARS - 1] + "…"
    return ModelError(code, message, retryable=retryable, status=status, retry_after_s=retry_after_s(headers))


def _transport_error(error: httpx.HTTPError) -> ModelError:
    # The message names the failure's kind only: httpx's own text may carry the URL.
    kind = type(error).__name__
    if isinstance(error, httpx.TimeoutException):
        return ModelError(MODEL_TIMEOUT, f"the provider did not answer in time ({kind})", retryable=True)
    if isinstance(error, httpx.DecodingError):
        return ModelError(MODEL_STREAM_INVALID, f"the provider's response could not be decoded ({kind})")
    return ModelError(
        MODEL_CONNECTION_FAILED, f"the connection to the provider failed ({kind})", retryable=True
    )


def _deadline_passed(total_s: float) -> ModelError:
    return ModelError(MODEL_TIMEOUT, f"the attempt took longer than {total_s:g} s", retryable=True)


class _Events:
    """The events of one response, read under the attempt's deadline."""

    def __init__(
        self, response: httpx.Response, parser: SseParser, deadline: float, total_s: float, max_bytes: int
    ) -> None:
        self._chunks = response.aiter_bytes()
        self._parser = parser
        self._bytes_left = max_bytes
        self._max_bytes = max_bytes
        self._deadline = deadline
        self._total_s = total_s
        self._ready: deque[SseEvent] = deque()
        self._ended = False

    def __aiter__(self) -> Self:
        return self

    async def aclose(self, response: httpx.Response) -> None:
        """Close the response, then finish httpx's chain of chunk generators.

        Closing only the outermost generator would leave the inner ones (httpx and httpcore
        nest four) to the garbage collector, which trio reports as a ``ResourceWarning``;
        reads after the close drain what was buffered, then fail at the innermost level and
        unwind them all (the caller bounds this with a short grace period).
        """
        await response.aclose()
        if self._ended:
            return
        self._ended = True
        with contextlib.suppress(Exception):
            while True:  # what h11 had buffered comes out first; then the closed socket fails
                await anext(self._chunks)

    async def __anext__(self) -> SseEvent:
        while not self._ready:
            if self._ended:
                raise StopAsyncIteration
            chunk = await self._read()
            if chunk is None:
                self._ended = True
                if not self._parser.at_boundary:
                    raise ModelError(
                        MODEL_CONNECTION_FAILED, "the stream ended inside an event", retryable=True
                    )
                raise StopAsyncIteration
            self._ready.extend(self._parser.feed(chunk))
        return self._ready.popleft()

    async def _read(self) -> bytes | None:
        # The whole-attempt deadline is checked before each read, not enforced by a cancel
        # scope around it: a scope costs ~5 µs, and almost every read returns at once from
        # h11's buffer (benchmarks/model_stream.py). A read that blocks is bounded by httpx's
        # read timeout, which the transport caps at the whole-attempt limit (decision 042).
        if trio.current_time() >= self._deadline:
            raise _deadline_passed(self._total_s)
        try:
            chunk = await anext(self._chunks)
        except StopAsyncIteration:
            return None
        except httpx.HTTPError as error:
            raise _transport_error(error) from error
        # Counted before the parser sees it: a body of pings and comments, which no adapter
        # keeps, still ends at the limit instead of running to the whole-attempt deadline.
        self._bytes_left -= len(chunk)
        if self._bytes_left < 0:
            raise ModelError(
                MODEL_STREAM_TOO_LARGE, f"the model's response body is longer than {self._max_bytes} bytes"
            )
        return chunk


class HttpSseTransport:
    """:class:`~harness_models._wire.SseTransport` over httpx: a streaming POST, its events.

    Without ``client`` the transport owns one (with a connection pool) and closes it in
    :meth:`aclose` (or at the end of ``async with``); a given client stays the caller's.

    Args:
        timeouts: Connect, between-reads and whole-attempt limits.
        client: An ``httpx.AsyncClient`` to use instead of an own one.
        max_line_bytes: The longest SSE line accepted.
        max_event_bytes: The most data one SSE event may carry.
        max_response_bytes: The longest response body read (``MODEL_STREAM_TOO_LARGE``
            past it).
    """

    def __init__(
        self,
        timeouts: Timeouts,
        *,
        client: httpx.AsyncClient | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        max_response_bytes: int = StreamLimits().max_response_bytes,
    ) -> None:
        if type(max_response_bytes) is not int or max_response_bytes < 1:
            raise ValueError("max_response_bytes must be a positive int")
        self._timeouts = timeouts
        self._max_response_bytes = max_response_bytes
        self._owns_client = client is None
        self._client = client if client is not None else httpx.AsyncClient(follow_redirects=False)
        self._limits = (max_line_bytes, max_event_bytes)
        # A read may block at most read_s, and never longer than a whole attempt may last.
        read_s = min(timeouts.read_s, timeouts.total_s)
        self._httpx_timeout = httpx.Timeout(
            connect=timeouts.connect_s, read=read_s, write=read_s, pool=timeouts.connect_s
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the client this transport created (a given client is left open)."""
        if self._owns_client:
            await self._client.aclose()

    @asynccontextmanager
    async def stream(
        self, url: str, *, headers: Mapping[str, str], body: bytes
    ) -> AsyncGenerator[AsyncIterator[SseEvent], None]:
        """POST ``body`` to ``url`` and yield an iterator over the response's events.

        Raises:
            ModelError: An error status (see :func:`error_for_status`), a timeout, a
                connection failure, or a success that is not ``text/event-stream``; while
                iterating, ``MODEL_STREAM_TOO_LARGE`` for a body past ``max_response_bytes``.
        """
        total_s = self._timeouts.total_s
        deadline = trio.current_time() + total_s
        request = self._client.build_request(
            "POST", url, headers=dict(headers), content=body, timeout=self._httpx_timeout
        )
        response: httpx.Response | None = None
        events: _Events | None = None
        try:
            with trio.move_on_at(deadline) as scope:
                try:
                    response = await self._client.send(request, stream=True)
                except httpx.HTTPError as error:
                    raise _transport_error(error) from error
                await self._check(response, tuple(headers.values()))
            if scope.cancelled_caught or response is None:
                raise _deadline_passed(total_s)
            parser = SseParser(max_line_bytes=self._limits[0], max_event_bytes=self._limits[1])
            events = _Events(response, parser, deadline, total_s, self._max_response_bytes)
            yield events
        finally:
            if response is not None:
                with trio.CancelScope(shield=True), trio.move_on_after(_CLOSE_GRACE_S):
                    if events is not None:
                        await events.aclose(response)
                    else:
                        await response.aclose()

    async def _check(self, response: httpx.Response, secrets: tuple[str, ...]) -> None:
        if not response.is_success:
            body = bytearray()
            try:
                # Read to the end (under the deadline) but keep only the start: leaving
                # httpx's generators half-read would leak them.
                async for chunk in response.aiter_bytes():
                    if len(body) < _MAX_ERROR_BODY_BYTES:
                        body += chunk[: _MAX_ERROR_BODY_BYTES - len(body)]
            except httpx.HTTPError:
                pass  # the status alone still says what happened
            raise error_for_status(response.status_code, response.headers, bytes(body), secrets=secrets)
        media_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media_type != "text/event-stream":
            shown = _printable(media_type[:100]) or "no"
            raise ModelError(
                MODEL_STREAM_INVALID,
                f"the provider answered HTTP {response.status_code} with {shown} content type, "
                "not text/event-stream",
                status=response.status_code,
            )
