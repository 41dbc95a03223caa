"""``AnthropicModel``: the Anthropic Messages API behind the kernel's ``ModelAdapter`` port."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Final, final

from harness_kernel.models import (
    ModelEvent,
    ModelRequest,
    ToolNameAliases,
    raise_if_aborted,
)
from harness_models._anthropic_wire import StreamDecoder, aliases_for, request_body
from harness_models._errors import MODEL_CONFIG_INVALID, ModelError
from harness_models._retry import retried_until_aborted
from harness_models._secrets import check_base_url
from harness_models._transport import HttpSseTransport
from harness_models._wire import (
    ApiKey,
    RetryPolicy,
    SseTransport,
    StreamLimits,
    Timeouts,
    checked_extra_headers,
)

__all__ = ["ANTHROPIC_API_VERSION", "AnthropicModel"]

ANTHROPIC_API_VERSION: Final = "2023-06-01"
"""The ``anthropic-version`` header this adapter speaks."""

_MESSAGES_PATH: Final = "/v1/messages"
_OWN_HEADERS: Final = frozenset({"x-api-key", "anthropic-version", "content-type", "accept", "authorization"})


@dataclass(frozen=True, slots=True)
class _Call:
    """One prepared request: where, with what, and how to name the calls that come back."""

    url: str
    headers: Mapping[str, str]
    body: bytes
    aliases: ToolNameAliases
    secret: str | None
    limits: StreamLimits


@final
class AnthropicModel:
    """A :class:`~harness_kernel.models.ModelAdapter` over the Anthropic Messages API.

    ``stream(request)`` posts one streaming ``/v1/messages`` request and yields a
    ``TextDeltaFrame`` per text delta as it arrives, then one ``ToolCallFrame`` per
    ``tool_use`` block (its input assembled from the ``input_json_delta`` fragments), then
    the ``ResponseCompletedFrame``. Tool names reach the provider as provider-safe aliases
    and come back canonical (decision 040). A retryable failure before the first frame
    starts a new attempt as ``retry`` allows; nothing is retried after a frame was handed
    on. ``request.signal`` and trio cancellation close the stream at once.

    Args:
        model: The provider's model name (sent as ``model``).
        api_key: The key for ``x-api-key``; ``None`` sends none (a local compatible server).
        base_url: The API root; ``/v1/messages`` is appended.
        transport: The SSE transport; by default an HTTP one made at the first request.
        retry: How failed attempts are retried.
        timeouts: The default transport's timeouts.
        max_tokens: ``max_tokens`` when neither the request nor its provider options set it.
        extra_headers: More request headers (``anthropic-beta``, say); they cannot replace
            the key, version, content type or accept headers.
        allow_insecure_http: Allow plain ``http`` to a non-loopback host.
        stream_limits: The most text, tool-input and body bytes one response may carry
            (``MODEL_STREAM_TOO_LARGE`` past them; the body limit is the default transport's).

    Raises:
        ModelError: ``MODEL_CONFIG_INVALID`` for an empty model or base URL, a
            ``max_tokens`` that is not a positive int, a key that is not an ``ApiKey``, or
            an extra header that is not a string pair or names one of the adapter's own.
    """

    __slots__ = (
        "_base_url",
        "_extra_headers",
        "_key",
        "_limits",
        "_max_tokens",
        "_model",
        "_retry",
        "_timeouts",
        "_transport",
    )

    def __init__(
        self,
        model: str,
        *,
        api_key: ApiKey | None,
        base_url: str = "https://api.anthropic.com",
        transport: SseTransport | None = None,
        retry: RetryPolicy = RetryPolicy(),  # noqa: B008 - frozen, so one shared default is safe
        timeouts: Timeouts = Timeouts(),  # noqa: B008 - frozen, so one shared default is safe
        max_tokens: int = 4096,
        extra_headers: Mapping[str, str] | None = None,
        allow_insecure_http: bool = False,
        stream_limits: StreamLimits = StreamLimits(),  # noqa: B008 - frozen, so one shared default is safe
    ) -> None:
        if type(model) is not str or not model.strip():
            raise ModelError(MODEL_CONFIG_INVALID, "the model name must be a non-empty string")
        if type(base_url) is not str or not base_url.strip():
            raise ModelError(MODEL_CONFIG_INVALID, "the base URL must be a non-empty string")
        if api_key is not None and type(api_key) is not ApiKey:
            raise ModelError(MODEL_CONFIG_INVALID, "the API key must be an ApiKey")
        if type(max_tokens) is not int or max_tokens < 1:
            raise ModelError(MODEL_CONFIG_INVALID, "max_tokens must be a positive int")
        if type(stream_limits) is not StreamLimits:
            raise ModelError(MODEL_CONFIG_INVALID, "stream_limits must be a StreamLimits")
        self._model = model
        self._key = api_key
        self._base_url = check_base_url(base_url, allow_insecure_http=allow_insecure_http)
        self._transport = transport
        self._retry = retry
        self._timeouts = timeouts
        self._max_tokens = max_tokens
        self._limits = stream_limits
        self._extra_headers = checked_extra_headers(extra_headers, _OWN_HEADERS)

    def __repr__(self) -> str:
        return f"AnthropicModel(model={self._model!r}, base_url={self._base_url!r})"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Answer ``request`` as a stream of frames ending with a ``ResponseCompletedFrame``.

        Raises:
            ModelError: The transport's errors, an ``error`` event, a malformed stream or
                tool input (the last one after any retries).
            ToolNameAliasError: A tool name of the request cannot be aliased.
            BaseException: The signal's reason, when ``request.signal`` aborts.
        """
        signal = request.signal
        raise_if_aborted(signal)
        call = self._prepare(request)
        transport = self._transport
        if transport is None:
            transport = self._transport = HttpSseTransport(
                self._timeouts, max_response_bytes=self._limits.max_response_bytes
            )
        frames = retried_until_aborted(lambda: _attempt(transport, call), self._retry, signal)
        async with aclosing(frames):
            async for frame in frames:
                yield frame

    def _prepare(self, request: ModelRequest) -> _Call:
        aliases = aliases_for(request)
        body = request_body(request, model=self._model, default_max_tokens=self._max_tokens, aliases=aliases)
        headers = {
            **self._extra_headers,
            "anthropic-version": ANTHROPIC_API_VERSION,
            "content-type": "application/json",
            "accept": "text/event-stream",
        }
        secret = None if self._key is None else self._key.reveal()
        if secret is not None:
            headers["x-api-key"] = secret
        return _Call(
            url=self._base_url + _MESSAGES_PATH,
            headers=headers,
            body=body,
            aliases=aliases,
            secret=secret,
            limits=self._limits,
        )


async def _attempt(transport: SseTransport, call: _Call) -> AsyncIterator[ModelEvent]:
    """One attempt: the text deltas while the stream is open, then the calls and the completion."""
    decoder = StreamDecoder(call.aliases, secret=call.secret, limits=call.limits)
    async with transport.stream(call.url, headers=call.headers, body=call.body) as events:
        async for event in events:
            decoder.answer.count_event()
            for frame in decoder.feed(event):
                yield frame
            if decoder.stopped:
                break
    for frame in decoder.finish():
        yield frame
