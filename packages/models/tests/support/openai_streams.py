"""Chat Completions streams as the provider sends them, and an in-memory SSE transport.

The chunk shapes follow OpenAI's API reference for ``chat.completion.chunk`` (``id``,
``object``, ``created``, ``model``, ``system_fingerprint``, ``choices[].delta`` with
``role``, ``content``, ``tool_calls[]`` of ``index``, ``id``, ``type``, ``function.name``,
``function.arguments``; ``logprobs``, ``finish_reason``; a last chunk with empty
``choices`` and ``usage`` when ``stream_options.include_usage`` is set; then ``[DONE]``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Final

from scripted_transport import STALL, RecordedRequest, ScriptedTransport

from harness_models._wire import SseEvent

__all__ = [
    "DONE",
    "STALL",
    "RecordedRequest",
    "ScriptedTransport",
    "chunk",
    "text_stream",
    "tool_stream",
    "usage_chunk",
]

CHUNK_ID: Final = "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT"


def _data(payload: Mapping[str, object] | str) -> SseEvent:
    return SseEvent(data=payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":")))


DONE: Final = SseEvent(data="[DONE]")


def chunk(
    delta: Mapping[str, object] | None = None, finish_reason: str | None = None, *, chunk_id: str = CHUNK_ID
) -> SseEvent:
    """One ``chat.completion.chunk`` with a single choice."""
    return _data(
        {
            "id": chunk_id,
            "object": "chat.completion.chunk",
            "created": 1741569952,
            "model": "gpt-4.1-2025-04-14",
            "service_tier": "default",
            "system_fingerprint": "fp_a1102cf978",
            "choices": [
                {"index": 0, "delta": dict(delta or {}), "logprobs": None, "finish_reason": finish_reason}
            ],
        }
    )


def usage_chunk(prompt: int, completion: int) -> SseEvent:
    """The last chunk of an ``include_usage`` stream: no choices, the usage."""
    return _data(
        {
            "id": CHUNK_ID,
            "object": "chat.completion.chunk",
            "created": 1741569952,
            "model": "gpt-4.1-2025-04-14",
            "system_fingerprint": "fp_a1102cf978",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
            },
        }
    )


def text_stream(*pieces: str, finish: str = "stop", usage: tuple[int, int] = (9, 3)) -> list[SseEvent]:
    """A plain text answer: the role chunk, one chunk per piece, the finish, usage, ``[DONE]``."""
    return [
        chunk({"role": "assistant", "content": "", "refusal": None}),
        *(chunk({"content": piece}) for piece in pieces),
        chunk({}, finish),
        usage_chunk(*usage),
        DONE,
    ]


def tool_stream(
    calls: Sequence[tuple[str, str, Sequence[str]]], *, text: Sequence[str] = (), finish: str = "tool_calls"
) -> list[SseEvent]:
    """Tool calls as OpenAI streams them: per call a first fragment with id, type, name and
    empty arguments, then one chunk per argument fragment; calls one after the other."""
    events = [chunk({"role": "assistant", "content": None})]
    events.extend(chunk({"content": piece}) for piece in text)
    for index, (call_id, name, fragments) in enumerate(calls):
        first = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        events.append(chunk({"tool_calls": [first]}))
        events.extend(
            chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
            for fragment in fragments
        )
    events.extend([chunk({}, finish), usage_chunk(20, 10), DONE])
    return events
