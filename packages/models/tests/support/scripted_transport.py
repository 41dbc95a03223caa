"""An in-memory ``SseTransport`` for both adapters' tests: it plays scripted attempts and
records what it was sent."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import trio

from harness_models import ModelError
from harness_models._wire import SseEvent

__all__ = ["STALL", "Attempt", "Item", "RecordedRequest", "ScriptedTransport"]

STALL: Final = "<stall>"
"""An item of a scripted attempt that waits forever (until cancelled)."""

Item: TypeAlias = SseEvent | ModelError | str
Attempt: TypeAlias = ModelError | Sequence[Item]


@dataclass(frozen=True)
class RecordedRequest:
    """What the adapter asked the transport for."""

    url: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body, decoded."""
        return json.loads(self.body)


class ScriptedTransport:
    """Each request takes the next scripted attempt: a ``ModelError`` is raised when the
    stream opens (an error status); a sequence is played item by item (an event is yielded,
    a ``ModelError`` raised mid-stream, :data:`STALL` waits forever). Records every request
    and counts the streams opened and closed."""

    def __init__(self, attempts: Iterable[Attempt]) -> None:
        self.attempts = list(attempts)
        self.requests: list[RecordedRequest] = []
        self.opened = 0
        self.closed = 0

    @asynccontextmanager
    async def stream(
        self, url: str, *, headers: Mapping[str, str], body: bytes
    ) -> AsyncGenerator[AsyncIterator[SseEvent], None]:
        self.requests.append(RecordedRequest(url, dict(headers), body))
        if not self.attempts:
            raise AssertionError("no scripted attempt left")
        attempt = self.attempts.pop(0)
        await trio.lowlevel.checkpoint()
        if isinstance(attempt, ModelError):
            raise attempt
        self.opened += 1
        events = self._play(attempt)
        try:
            yield events
        finally:
            # Leaving the context closes the stream, as the port promises.
            await events.aclose()
            self.closed += 1

    async def _play(self, items: Sequence[Item]) -> AsyncGenerator[SseEvent, None]:
        for item in items:
            await trio.lowlevel.checkpoint()
            if isinstance(item, ModelError):
                raise item
            if isinstance(item, str):
                await trio.sleep_forever()
            else:
                yield item
