"""``OpenAIChatModel``: the Chat Completions wire (OpenAI and every compatible server).

One streaming ``POST {base_url}/chat/completions`` per attempt; text deltas are handed on as
they arrive, tool calls once the stream ended, then the completion. Attempts are retried
only before the first frame (:func:`~harness_models._retry.retried_until_aborted`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from typing import Final, TypeVar

from harness_kernel.models import ModelEvent, ModelRequest, ToolNameAliases, raise_if_aborted
from harness_models._errors import MODEL_CONFIG_INVALID, ModelError
from harness_models._openai_wire import ChunkAssembler, MaxTokensField, aliases_for, encode_body
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

__all__ = ["OPENAI_BASE_URL", "OpenAIChatModel"]

OPENAI_BASE_URL: Final = "https://api.openai.com/v1"
"""OpenAI's own endpoint; compatible servers take their own ``base_url``."""


T = TypeVar("T")


class OpenAIChatModel:
    """A :class:`~harness_kernel.models.ModelAdapter` over the Chat Completions streaming wire.

    Serves OpenAI and OpenAI-compatible servers (vLLM, Ollama, llama.cpp's server, LM
    Studio). Tool names are shown to the provider as provider-safe aliases and mapped back
    (decision 040); a name the request never offered comes back as ``?name``, which the
    runtime refuses as ``TOOL_NOT_FOUND``. The key is sent only in the ``Authorization``
    header and never shows in ``repr``, an error or a frame.

    Args:
        model: The provider's model name, sent as ``model`` (``request.model`` is the
            runtime's label and is not sent).
        api_key: The key, or ``None`` for servers that need none (no ``Authorization``).
        base_url: The API root; ``https``, or plain ``http`` to a loopback address only
            unless ``allow_insecure_http``. No credentials, query or fragment.
        transport: The SSE transport; by default an ``HttpSseTransport(timeouts)``, made
            at the first request.
        retry: How attempts that fail before the first frame are retried.
        timeouts: The default transport's timeouts.
        extra_headers: More request headers (not ``Authorization``, ``Content-Type``,
            ``Accept``, ``Content-Length`` or ``Host``).
        max_tokens_field: The body field for ``request.max_tokens``: ``max_tokens`` (what
            every compatible server reads) or ``max_completion_tokens`` (what OpenAI's
            reasoning models require).
        allow_insecure_http: Allow plain ``http`` to a non-loopback host.
        stream_limits: The most text, argument and body bytes one response may carry
            (``MODEL_STREAM_TOO_LARGE`` past them; the body limit is the default transport's).

    Raises:
        ModelError: ``MODEL_CONFIG_INVALID`` for any unusable argument.
    """

    __slots__ = (
        "_api_key",
        "_headers",
        "_limits",
        "_max_tokens_field",
        "_retry",
        "_timeouts",
        "_transport",
        "_url",
        "base_url",
        "model",
    )

    def __init__(
        self,
        model: str,
        *,
        api_key: ApiKey | None,
        base_url: str = OPENAI_BASE_URL,
        transport: SseTransport | None = None,
        retry: RetryPolicy = RetryPolicy(),  # noqa: B008 - frozen, shared safely
        timeouts: Timeouts = Timeouts(),  # noqa: B008 - frozen, shared safely
        extra_headers: Mapping[str, str] | None = None,
        max_tokens_field: MaxTokensField = "max_tokens",
        allow_insecure_http: bool = False,
        stream_limits: StreamLimits = StreamLimits(),  # noqa: B008 - frozen, shared safely
    ) -> None:
        if type(model) is not str or not model.strip() or len(model) > 256:
            raise _config("model must be a non-empty str of at most 256 characters")
        if api_key is not None and type(api_key) is not ApiKey:
            raise _config("api_key must be an ApiKey or None")
        if type(retry) is not RetryPolicy or type(timeouts) is not Timeouts:
            raise _config("retry must be a RetryPolicy and timeouts a Timeouts")
        if type(stream_limits) is not StreamLimits:
            raise _config("stream_limits must be a StreamLimits")
        if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise _config("max_tokens_field must be 'max_tokens' or 'max_completion_tokens'")
        self.model = model
        if type(base_url) is not str or not base_url or len(base_url) > 2048:
            raise _config("base_url must be a non-empty str of at most 2048 characters")
        self.base_url = check_base_url(base_url, allow_insecure_http=allow_insecure_http)
        self._url = f"{self.base_url}/chat/completions"
        self._api_key = api_key
        self._transport = transport
        self._retry = retry
        self._timeouts = timeouts
        self._limits = stream_limits
        self._max_tokens_field: MaxTokensField = max_tokens_field
        self._headers = _headers(api_key, extra_headers)

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.base_url!r})"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Answer ``request``: text deltas as they arrive, then the tool calls, then the completion.

        Raises:
            ModelError: a typed provider, transport or stream failure (retried first when
                retryable and no frame was handed on yet).
            ToolNameAliasError: a tool name of the request cannot be aliased.
            BaseException: the signal's reason when ``request.signal`` aborts.
        """
        signal = request.signal
        raise_if_aborted(signal)
        aliases = aliases_for(request)
        body = encode_body(self.model, request, aliases, self._max_tokens_field)
        transport = self._transport_for_use()

        def attempt() -> AsyncIterator[ModelEvent]:
            return self._attempt(transport, body, aliases)

        async with aclosing(retried_until_aborted(attempt, self._retry, signal)) as frames:
            async for frame in frames:
                yield frame

    def _transport_for_use(self) -> SseTransport:
        if self._transport is None:
            self._transport = HttpSseTransport(
                self._timeouts, max_response_bytes=self._limits.max_response_bytes
            )
        return self._transport

    async def _attempt(
        self, transport: SseTransport, body: bytes, aliases: ToolNameAliases
    ) -> AsyncIterator[ModelEvent]:
        """One request: its events become frames; leaving closes the stream at once."""
        secret = None if self._api_key is None else self._api_key.reveal()
        assembler = ChunkAssembler(aliases, secret=secret, limits=self._limits)
        async with transport.stream(self._url, headers=self._headers, body=body) as events:
            async for event in events:
                assembler.answer.count_event()
                if event.event == "error":
                    raise assembler.error_event(event.data)
                if event.event != "message":
                    continue  # a named event the Chat Completions wire does not define
                for frame in assembler.feed(event.data):
                    yield frame
                if assembler.done:
                    break
        for frame in assembler.finish():
            yield frame


def _config(message: str) -> ModelError:
    return ModelError(MODEL_CONFIG_INVALID, message)


def _headers(api_key: ApiKey | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    headers = checked_extra_headers(extra, frozenset({"authorization"}))
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key.reveal()}"
    headers["Content-Type"] = "application/json"
    headers["Accept"] = "text/event-stream"
    return headers
