"""Outbound flow control: bursts beyond the outbound cap reach a reading client; a stalled one gets 1013."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import trio
from wsproto.events import CloseConnection, Ping, Pong, TextMessage

from agent_server.client import AcpClient, initialize_params
from harness_kernel.events import create_event
from harness_kernel.legacy import RunCanceledError, RunOptions, RunResult
from harness_kernel.models import Usage
from harness_kernel.store import SqliteSessionStore

if TYPE_CHECKING:
    from conftest import ServerFactory

# 16 KiB messages give the smallest outbound cap, 64 KiB; 200 events of 4 KiB are 12 times that.
SMALL_MESSAGES = 16_384
BURST_EVENTS = 200
DELTA_BYTES = 4096


class BurstRun:
    """A ``run`` seam: "burst" emits ``BURST_EVENTS`` 4 KiB deltas at once; "wait" waits for the abort."""

    def __init__(self) -> None:
        self.aborted = trio.Event()

    async def __call__(self, options: RunOptions) -> RunResult:
        assert options.on_event is not None
        assert options.signal is not None
        if options.goal == "wait":
            await options.signal.wait()
            self.aborted.set()
            raise RunCanceledError
        ids = {"runId": "run-1", "sessionId": options.session_id, "turnId": "turn-1", "requestId": "req-1"}
        for sequence in range(BURST_EVENTS):
            data: dict[str, object] = {
                **ids,
                "messageId": "msg-1",
                "role": "assistant",
                "sequence": sequence,
                "delta": f"{sequence:08d}" + "x" * (DELTA_BYTES - 8),
            }
            await options.on_event(create_event("message.delta", data, at="2026-01-01T00:00:00.000Z"))
        usage = Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2)
        return RunResult(status="completed", text="done", usage=usage, steps=1, tool_calls=0, events=())


async def _burst_session(client: AcpClient) -> tuple[str, list[dict[str, object]]]:
    """Create a session, run the burst and return its id and streamed notification params."""
    await client.initialize()
    session_id = (await client.request("session/new", {"workspace": "ws"}))["sessionId"]
    result, notes = await client.prompt(session_id, "burst")
    assert result["status"] == "completed"
    return session_id, [note["params"] for note in notes]


def _deltas(params: list[dict[str, object]]) -> list[int]:
    return [note["event"]["data"]["sequence"] for note in params]  # type: ignore[index]


async def test_a_restore_page_larger_than_the_outbound_cap_reaches_a_client_that_reads_normally(
    running: ServerFactory,
) -> None:
    options = {"run": BurstRun(), "max_message_bytes": SMALL_MESSAGES}
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
            tail = {"sessionId": session_id, "afterSeq": BURST_EVENTS - 1}
            assert (await reader.request("session/restore", tail))["replayedEvents"] == 0
        assert replay["status"] == "completed"
        assert replay["replayedEvents"] == BURST_EVENTS
        assert replay["hasMore"] is False
        assert replayed == streamed


async def test_a_burst_of_events_without_a_store_reaches_a_client_that_reads_normally(
    running: ServerFactory,
) -> None:
    options = {"run": BurstRun(), "max_message_bytes": SMALL_MESSAGES, "db_path": None, "persistence": False}
    async with running(**options) as handle, handle.connect() as client:
        _, streamed = await _burst_session(client)
        assert [note["seq"] for note in streamed] == list(range(BURST_EVENTS))
        assert _deltas(streamed) == list(range(BURST_EVENTS))
        assert not client.closed.is_set()


async def test_a_client_that_stops_reading_a_restore_page_is_closed_with_1013_and_the_page_stays_restorable(
    running: ServerFactory, tmp_path: Path
) -> None:
    (tmp_path / "state").mkdir()
    store = SqliteSessionStore(tmp_path / "state" / "stalled.sqlite")
    run = BurstRun()
    options = {"db_path": None, "session_store": store, "run": run, "max_message_bytes": SMALL_MESSAGES}
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
            with trio.fail_after(30):
                await run.aborted.wait()
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
    options = {"run": BurstRun(), "max_message_bytes": SMALL_MESSAGES}
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
