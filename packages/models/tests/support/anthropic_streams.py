"""Wire-exact Anthropic Messages streams, written from the public streaming reference, and
an in-memory ``SseTransport`` that replays them and records what it was sent."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Final, TypeAlias

import trio

from harness_models import ModelError
from harness_models._wire import SseEvent

__all__ = [
    "HANG",
    "Item",
    "Recorded",
    "ScriptedTransport",
    "chain",
    "event",
    "message_end",
    "message_start",
    "text_block",
    "tool_block",
]

HANG: Final = "hang"
"""A script item that waits forever (until cancelled)."""

Item: TypeAlias = SseEvent | ModelError | str
Script: TypeAlias = Sequence[Item]


def event(kind: str, **fields: object) -> SseEvent:
    """One server-sent event as the API frames it: ``event: kind`` and its JSON ``data``."""
    return SseEvent(event=kind, data=json.dumps({"type": kind, **fields}))


def message_start(message_id: str = "msg_01", input_tokens: int = 25, **usage: int) -> list[Item]:
    """``message_start`` with an empty assistant message, as the reference shows it."""
    message: dict[str, object] = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude-test",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1, **usage},
    }
    return [event("message_start", message=message)]


def text_block(index: int, *pieces: str) -> list[Item]:
    """A text block: its start, one ``text_delta`` per piece, its stop."""
    return [
        event("content_block_start", index=index, content_block={"type": "text", "text": ""}),
        *(event("content_block_delta", index=index, delta={"type": "text_delta", "text": p}) for p in pieces),
        event("content_block_stop", index=index),
    ]


def tool_block(index: int, tool_id: str, name: str, *fragments: str) -> list[Item]:
    """A ``tool_use`` block: its start (empty input), one ``input_json_delta`` per fragment, its stop."""
    start: dict[str, object] = {"type": "tool_use", "id": tool_id, "name": name, "input": {}}
    return [
        event("content_block_start", index=index, content_block=start),
        *(
            event("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": f})
            for f in fragments
        ),
        event("content_block_stop", index=index),
    ]


def message_end(stop_reason: str | None = "end_turn", output_tokens: int = 15) -> list[Item]:
    """``message_delta`` with the stop reason and cumulative usage, then ``message_stop``."""
    return [
        event(
            "message_delta",
            delta={"stop_reason": stop_reason, "stop_sequence": None},
            usage={"output_tokens": output_tokens},
        ),
        event("message_stop"),
    ]


@dataclass(frozen=True)
class Recorded:
    """One request the transport received."""

    url: str
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> object:
        return json.loads(self.body)


class ScriptedTransport:
    """Plays one script per attempt: a ``ModelError`` raised on opening (an error status), or
    a sequence of events, errors (raised mid-stream) and :data:`HANG`."""

    def __init__(self, attempts: Iterable[Script | ModelError]) -> None:
        self.attempts = list(attempts)
        self.requests: list[Recorded] = []
        self.opened = 0
        self.closed = 0

    def stream(
        self, url: str, *, headers: Mapping[str, str], body: bytes
    ) -> AbstractAsyncContextManager[AsyncIterator[SseEvent]]:
        return self._stream(url, headers, body)

    @asynccontextmanager
    async def _stream(
        self, url: str, headers: Mapping[str, str], body: bytes
    ) -> AsyncGenerator[AsyncIterator[SseEvent]]:
        self.requests.append(Recorded(url, dict(headers), body))
        if not self.attempts:
            raise AssertionError("no scripted attempt left")
        script = self.attempts.pop(0)
        await trio.lowlevel.checkpoint()
        if isinstance(script, ModelError):
            raise script
        self.opened += 1
        events = self._events(script)
        try:
            yield events
        finally:
            # Leaving the context closes the stream, as the port promises.
            await events.aclose()
            self.closed += 1

    async def _events(self, script: Script) -> AsyncGenerator[SseEvent]:
        for item in script:
            await trio.lowlevel.checkpoint()
            if isinstance(item, ModelError):
                raise item
            if isinstance(item, str):
                await trio.sleep_forever()
            else:
                yield item


def chain(*parts: Sequence[Item]) -> list[Item]:
    """The items of ``parts``, one after another."""
    return [item for part in parts for item in part]
