"""Outbound flow control: bursts beyond the outbound cap reach a reading client; a stalled one gets 1013."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio
from wsproto.events import CloseConnection, Ping, Pong, TextMessage

from agent_server.client import AcpClient, initialize_params
from harness_kernel.models import (
    CompletionResponse,
    ModelEvent,
    ModelRequest,
    ResponseCompletedFrame,
    TextDeltaFrame,
    Usage,
    UserMessage,
)
from harness_kernel.store import SqliteSessionStore

if TYPE_CHECKING:
    from conftest import ServerFactory

# Each test commits hundreds of events (SQLite, synchronous FULL) and pushes them past the
# outbound cap: slow by nature, so outside the inner loop (-m "not slow").
pytestmark = pytest.mark.slow

# 16 KiB messages give the smallest outbound cap, 64 KiB. 900 deltas of 14 characters are
# about 5 times that on the wire (each notification carries its ids), while the answer they
# add up to, which ``message.completed`` carries whole, still fits in one 16 KiB message.
SMALL_MESSAGES = 16_384
BURST_EVENTS = 900
DELTA_CHARS = 14


class BurstRun:
    """A model factory: "burst" streams ``BURST_EVENTS`` small deltas at once; "wait" waits forever."""

    def __call__(self) -> BurstRun:
        return self

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        last = request.messages[-1]
        if isinstance(last, UserMessage) and last.content == "wait":
            await trio.sleep_forever()
        deltas = [f"{sequence:08d}" + "x" * (DELTA_CHARS - 8) for sequence in range(BURST_EVENTS)]
        for delta in deltas:
            yield TextDeltaFrame(delta)
        usage = Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2)
        yield ResponseCompletedFrame(CompletionResponse("resp-1", "".join(deltas), (), usage, "stop"))


async def _burst_session(client: AcpClient) -> tuple[str, list[dict[str, object]]]:
    """Create a session, run the burst and return its id and streamed notification params."""
    await client.initialize()
    session_id = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
    result, notes = await client.prompt(session_id, "burst")
    assert result["status"] == "completed"
    return session_id, [note["params"] for note in notes]


def _deltas(params: list[dict[str, object]]) -> list[int]:
    """The ``sequence`` of every ``message.delta`` among ``params``, in stream order."""
    return [
        note["event"]["data"]["sequence"]  # type: ignore[index]
        for note in params
        if note["event"]["type"] == "message.delta"  # type: ignore[index]
    ]


async def test_a_restore_page_larger_than_the_outbound_cap_reaches_a_client_that_reads_normally(
    running: ServerFactory,
) -> None:
    options = {"models": {"fake-model/v1": BurstRun()}, "max_message_bytes": SMALL_MESSAGES}
    async with running(**options) as handle:
        async with handle.connect() as writer:
            session_id, streamed = await _burst_session(writer)
        assert _deltas(streamed) == list(range(BURST_EVENTS))
        async with handle.connect() as reader:
            await reader.initialize()
            params = {"sessionId": session_id, "afterSeq": -1, "limit": 1000}
            replay = await reader.request("session/restore", params)
            replayed = [note["params"] for note in reader.drain_notifications()]
            # The connection stays usable after the page: it was not closed for backpressure.
            tail = {"sessionId": session_id, "afterSeq": len(streamed) - 1}
            assert (await reader.request("session/restore", tail))["replayedEvents"] == 0
        assert replay["status"] == "completed"
        assert replay["replayedEvents"] == len(streamed)
        assert replay["hasMore"] is False
        assert replayed == streamed


async def test_a_burst_of_events_without_a_store_reaches_a_client_that_reads_normally(
    running: ServerFactory,
) -> None:
    options = {
        "models": {"fake-model/v1": BurstRun()},
        "max_message_bytes": SMALL_MESSAGES,
        "db_path": None,
        "persistence": False,
    }
    async with running(**options) as handle, handle.connect() as client:
        _, streamed = await _burst_session(client)
        assert [note["seq"] for note in streamed] == list(range(len(streamed)))
        assert _deltas(streamed) == list(range(BURST_EVENTS))
        assert not client.closed.is_set()


async def test_a_client_that_stops_reading_a_restore_page_is_closed_with_1013_and_the_page_stays_restorable(
    running: ServerFactory, tmp_path: Path
) -> None:
    (tmp_path / "state").mkdir()
    store = SqliteSessionStore(tmp_path / "state" / "stalled.sqlite")
    run = BurstRun()
    # A short stall, so the test does not sit out the 5 s default (test_transport pins its length).
    options = {
        "db_path": None,
        "session_store": store,
        "models": {"fake-model/v1": run},
        "max_message_bytes": SMALL_MESSAGES,
        "outbound_stall_ms": 500,
    }
    async with store, running(**options) as handle:
        async with handle.connect() as writer:
            session_id, streamed = await _burst_session(writer)
        async with running.raw_websocket(handle, receive_buffer=4096) as raw:
            await raw.send_request(1, "initialize", initialize_params())
            assert "result" in await raw.next_message()
            await raw.send_request(2, "session/new", {"workspace": "ws"})
            waiting_id = (await raw.next_message())["result"]["sessionId"]
            # A run that only ends when the connection is given up: it reveals the 1013 close.
            await raw.send_request(3, "session/prompt", {"sessionId": waiting_id, "content": "wait"})
            restore = {"sessionId": session_id, "afterSeq": -1, "limit": 1000}
            await raw.send_request(4, "session/restore", restore)
            # Not reading: the socket buffers fill, the queue reaches its cap and the peer makes
            # no progress, so the server gives up on the connection and aborts the waiting run.
            # The waiting run may never reach its model (its first events queue behind the
            # page), so its end shows as its closed row.
            with trio.fail_after(30):
                await running.wait_for_closed_row(store, waiting_id)
            # Reading again within the 1 s grace lets the frame in flight and the close through.
            events = await raw.events_until_end()
        closing = events[-1]
        assert isinstance(closing, CloseConnection)
        assert closing.code == 1013
        texts = [event for event in events if isinstance(event, TextMessage)]
        joined = "".join(event.data + ("\n" if event.message_finished else "") for event in texts)
        received = [json.loads(line) for line in joined.splitlines()]
        # The queue was dropped: the page was not delivered whole, nor the restore answered.
        pages = [message["params"] for message in received if message.get("method") == "session/event"]
        restored = [note for note in pages if note["sessionId"] == session_id]
        assert len(restored) < BURST_EVENTS
        assert restored == streamed[: len(restored)]
        assert all(message.get("id") != 4 for message in received)

        # Every committed event stays readable from another connection.
        async with handle.connect() as fresh:
            await fresh.initialize()
            replayed = await running.replay_all(fresh, session_id, page=1000)
        assert replayed == streamed


async def test_a_ping_during_a_restore_page_at_the_outbound_cap_is_answered_without_closing(
    running: ServerFactory,
) -> None:
    options = {"models": {"fake-model/v1": BurstRun()}, "max_message_bytes": SMALL_MESSAGES}
    async with running(**options) as handle:
        async with handle.connect() as writer:
            session_id, streamed = await _burst_session(writer)
        async with running.raw_websocket(handle) as raw:
            await raw.send_request(1, "initialize", initialize_params())
            assert "result" in await raw.next_message()
            await raw.send_request(
                2, "session/restore", {"sessionId": session_id, "afterSeq": -1, "limit": 1000}
            )
            pongs: list[bytes] = []
            parts: list[str] = []
            received: list[dict[str, object]] = []
            with trio.fail_after(10):
                while not received or received[-1].get("id") != 2:
                    data = await raw.stream.receive_some(65_536)
                    assert data, "the server ended the stream"
                    raw.frames.receive_data(data)
                    for event in raw.frames.events():
                        assert not isinstance(event, CloseConnection), event
                        if isinstance(event, Pong):
                            pongs.append(bytes(event.payload))
                        elif isinstance(event, TextMessage):
                            parts.append(event.data)
                            if event.message_finished:
                                received.append(json.loads("".join(parts)))
                                parts = []
                                if len(received) == 1:
                                    # The page now keeps the queue at its cap: the pong must wait
                                    # for room like any frame, not overflow the queue.
                                    await raw.send_event(Ping(b"still here"))
        assert pongs == [b"still here"]
        assert [message["params"] for message in received[:-1]] == streamed
