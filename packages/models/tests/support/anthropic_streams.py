"""Wire-exact Anthropic Messages streams, written from the public streaming reference, and
an in-memory ``SseTransport`` that replays them and records what it was sent."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from scripted_transport import STALL, Item, ScriptedTransport
from scripted_transport import RecordedRequest as Recorded

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

HANG: Final = STALL
"""A script item that waits forever (until cancelled)."""


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


def chain(*parts: Sequence[Item]) -> list[Item]:
    """The items of ``parts``, one after another."""
    return [item for part in parts for item in part]
