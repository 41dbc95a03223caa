"""The WebSocket driver of one socket: wsproto frames in and out, limits and close codes (spec §2.4).

Project code never parses or builds frame bytes: wsproto's frame-level ``Connection``
does both. This module only feeds it, counts bytes and fragments, and queues its output.
"""

from __future__ import annotations

import contextlib
import logging
import math
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Final

import trio
from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage
from wsproto.utilities import LocalProtocolError

__all__ = ["WebSocketDriver", "cut_reason"]

_log: Final = logging.getLogger("agent_server")

MAX_FRAGMENTS: Final = 1024
INCOMPLETE_FRAME_SECONDS: Final = 30.0
CLOSE_GRACE_SECONDS: Final = 1.0
"""The default wait for the peer's close after ours, before the TCP stream is aborted."""
OUTBOUND_STALL_SECONDS: Final = 5.0
"""The default time a full outbound queue may see the peer accept no byte before the 1013 close."""
_SEND_SLICE_BYTES: Final = 16_384
_COALESCE_BYTES: Final = 65_536
"""Frames already queued are sent together up to this size: one socket write for a
batch of events instead of one per event."""
_RECEIVE_BYTES: Final = 65_536
_MAX_REASON_BYTES: Final = 123


def cut_reason(reason: str) -> str:
    """``reason`` cut at a code-point boundary to at most 123 UTF-8 bytes."""
    encoded = reason.encode("utf-8", "replace")
    if len(encoded) <= _MAX_REASON_BYTES:
        return reason
    return encoded[:_MAX_REASON_BYTES].decode("utf-8", "ignore")


class WebSocketDriver:
    """Drives one upgraded socket.

    Args:
        stream: The TCP stream, after the 101 response.
        trailing_data: Bytes h11 read past the request head.
        max_message_bytes: The inbound and outbound text limit in UTF-8 bytes.
        stall_seconds: How long a full outbound queue may see the peer accept no byte
            before the socket is closed with 1013.
        close_grace_seconds: How long a close waits for the peer's close before the TCP
            stream is aborted.
    """

    def __init__(
        self,
        stream: trio.abc.Stream,
        trailing_data: bytes,
        *,
        max_message_bytes: int,
        stall_seconds: float = OUTBOUND_STALL_SECONDS,
        close_grace_seconds: float = CLOSE_GRACE_SECONDS,
    ) -> None:
        self._stream = stream
        self._stall_seconds = stall_seconds
        self._close_grace_seconds = close_grace_seconds
        self._ws = Connection(ConnectionType.SERVER)
        self._pending_input = trailing_data
        self._max_message_bytes = max_message_bytes
        self._outbound_cap = max(64 * 1024, 2 * max_message_bytes)
        self._queue_limit = self._outbound_cap - max_message_bytes
        self._queued_bytes = 0
        self._in_flight_bytes = 0
        self._outbox, self._outbox_reader = trio.open_memory_channel[bytes](math.inf)
        self._send_order = trio.Lock()
        self._room = trio.Event()
        self._last_progress = trio.current_time()
        self._output_discarded = False
        self._reading = trio.CancelScope()
        self._peer_closed = trio.Event()
        self._close_flushed = trio.Event()
        self.close_sent = False
        self.close_code: int | None = None
        self._close_reply: tuple[int, str] | None = None

    # ------------------------------------------------------------ output

    def _enqueue(self, frame: bytes) -> None:
        self._queued_bytes += len(frame)
        self._outbox.send_nowait(frame)

    def _overflow(self) -> None:
        # The peer stopped reading: drop what is queued and try to say why.
        while True:
            try:
                self._outbox_reader.receive_nowait()
            except trio.WouldBlock:
                break
        self._queued_bytes = self._in_flight_bytes
        self.close(1013, "outbound queue is full")

    def _wake_senders(self) -> None:
        self._room.set()
        self._room = trio.Event()

    async def send_text(self, text: str) -> None:
        """Queue one text message once the outbound queue has room for it.

        A sender waits while the queue is at its cap and the peer keeps accepting bytes, so a
        client that reads normally receives every frame however large the burst (a restore
        page, a fast run). When the peer has accepted nothing for ``stall_seconds`` while the
        queue is full, it has stopped reading: the queue is dropped and the socket
        closed with 1013. An oversized message closes with 1009. After a close, or once
        output is discarded at disconnect, the message is dropped.
        """
        if self._output_discarded or self.close_sent:
            return
        size = len(text.encode("utf-8"))
        if size > self._max_message_bytes:
            self.close(1009, "outbound message is too large")
            return
        # The frame is built only once there is room, so a waiting message is held once (as
        # the caller's text), not also as frame bytes.
        if await self._wait_for_room(size + _frame_header_bytes(size)):
            self._enqueue(self._ws.send(TextMessage(data=text)))

    async def _queue_when_room(self, frame: bytes) -> None:
        if await self._wait_for_room(len(frame)):
            self._enqueue(frame)

    async def _wait_for_room(self, frame_bytes: int) -> bool:
        """Wait, in arrival order, until ``frame_bytes`` fit; ``False`` when nothing may be queued.

        Frames take the lock in arrival order (trio's Lock is fair), so waiting for room never
        reorders one session's events or a response before its events. The caller must
        enqueue before its next ``await`` so that it keeps its place. The queue is limited to
        ``cap - max_message_bytes`` (one frame is always admitted into an empty queue), so the
        queue plus the one message waiting for room stay within the outbound cap.
        """
        # trio's Lock yields to the scheduler even when free; a free lock is taken here at
        # once (``acquire_nowait`` refuses while others wait, so arrival order still holds).
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            self._send_order.acquire_nowait()
        except trio.WouldBlock:
            await self._send_order.acquire()
        try:
            return await self._wait_for_room_locked(frame_bytes)
        finally:
            self._send_order.release()

    async def _wait_for_room_locked(self, frame_bytes: int) -> bool:
        waiting_since = trio.current_time()
        while self._queued_bytes and self._queued_bytes + frame_bytes > self._queue_limit:
            if self._output_discarded or self.close_sent:
                return False
            room = self._room
            stalled_at = max(self._last_progress, waiting_since) + self._stall_seconds
            with trio.move_on_at(stalled_at):
                await room.wait()
                continue
            self._overflow()
            return False
        return not (self._output_discarded or self.close_sent)

    def discard_output(self) -> None:
        """Drop every message not yet queued, now and later (disconnect: nothing more is sent)."""
        self._output_discarded = True
        self._wake_senders()

    def close(self, code: int, reason: str) -> None:
        """Queue a close frame once and stop reading."""
        if self.close_sent:
            return
        self.close_sent = True
        self.close_code = code
        self._reading.cancel()
        self._wake_senders()
        try:
            frame = self._ws.send(CloseConnection(code=code, reason=cut_reason(reason)))
        except LocalProtocolError:
            self._close_flushed.set()
            return
        self._enqueue(frame)

    async def write_frames(self) -> None:
        """Send queued frames until the socket breaks or the task is cancelled.

        Frames go out in slices so that progress (the peer accepting bytes) is seen while a
        large frame is still being sent.
        """
        try:
            async for first in self._outbox_reader:
                frame = self._with_queued_frames(first)
                self._in_flight_bytes = len(frame)
                view = memoryview(frame)
                for start in range(0, len(frame), _SEND_SLICE_BYTES):
                    piece = view[start : start + _SEND_SLICE_BYTES]
                    try:
                        await self._stream.send_all(piece)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        return
                    self._last_progress = trio.current_time()
                    self._in_flight_bytes -= len(piece)
                    self._queued_bytes = max(0, self._queued_bytes - len(piece))
                    self._wake_senders()
                if self.close_sent and not self._queued_bytes:
                    self._close_flushed.set()
        finally:
            # Nothing will drain the queue any more: senders must not wait for room.
            self._output_discarded = True
            self._wake_senders()

    def _with_queued_frames(self, first: bytes) -> bytes:
        """``first`` and the frames queued behind it, up to :data:`_COALESCE_BYTES`, as one write."""
        frames = [first]
        size = len(first)
        while size < _COALESCE_BYTES:
            try:
                frame = self._outbox_reader.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                break
            frames.append(frame)
            size += len(frame)
        return first if len(frames) == 1 else b"".join(frames)

    # ------------------------------------------------------------ input

    async def read_messages(self, deliver: Callable[[str], Awaitable[None]]) -> None:
        """Read until a close, an error or cancellation of reading; text messages go to ``deliver``."""
        with self._reading:
            try:
                await self._read_loop(deliver)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._peer_closed.set()
            except Exception:
                _log.exception("WebSocket driver failed")
                self.close(1011, "internal error")

    def stop_reading(self) -> None:
        """Make :meth:`read_messages` return (used at shutdown)."""
        self._reading.cancel()

    async def _receive(self, incomplete_since: float | None) -> bytes | bytearray | None:
        """The next bytes from the peer; ``None`` when a half-read frame ran out of time.

        With no frame half read nothing has a deadline, so no cancel scope is opened for the
        common case of waiting for the next message.
        """
        if incomplete_since is None:
            return await self._stream.receive_some(_RECEIVE_BYTES)
        with trio.move_on_at(incomplete_since + INCOMPLETE_FRAME_SECONDS):
            return await self._stream.receive_some(_RECEIVE_BYTES)
        return None

    async def _read_loop(self, deliver: Callable[[str], Awaitable[None]]) -> None:
        parts: list[str] = []
        size = 0
        fragments = 0
        in_message = False
        incomplete_since: float | None = None
        data = self._pending_input
        while True:
            if data:
                self._ws.receive_data(bytes(data))
            progressed = False
            for event in self._ws.events():
                progressed = True
                if isinstance(event, TextMessage):
                    in_message = True
                    size += len(event.data.encode("utf-8"))
                    fragments += 1 if event.frame_finished else 0
                    if size > self._max_message_bytes:
                        self.close(1009, "message is too large")
                        return
                    if fragments > MAX_FRAGMENTS:
                        self.close(1009, "message has too many fragments")
                        return
                    parts.append(event.data)
                    if event.message_finished:
                        text = "".join(parts)
                        parts, size, fragments, in_message = [], 0, 0, False
                        await deliver(text)
                elif isinstance(event, BytesMessage):
                    self.close(1003, "binary messages are not supported")
                    return
                elif isinstance(event, Ping):
                    # Flow-controlled like any frame: a reading peer's ping never overflows a queue
                    # that a large burst keeps at its cap.
                    await self._queue_when_room(self._ws.send(event.response()))
                    if self.close_sent:
                        return
                elif isinstance(event, CloseConnection):
                    if self._ws.state is ConnectionState.REMOTE_CLOSING:
                        # The reply waits for finish(): the server first applies the disconnect
                        # (sessions stopped, their rows durable), so a client that has seen its
                        # close answered finds them so when it reconnects at once.
                        self._peer_closed.set()
                        self._close_reply = (event.code, event.reason or "")
                    else:
                        # wsproto reports a protocol (1002) or UTF-8 (1007) failure this way.
                        self.close(event.code, event.reason or "invalid frame")
                    return
            pending = self._frame_bytes_pending()
            if progressed and not in_message:
                # A read can complete one message and start the next frame: that frame's
                # deadline starts now.
                incomplete_since = trio.current_time() if pending else None
            elif (data or pending) and incomplete_since is None:
                incomplete_since = trio.current_time()
            received = await self._receive(incomplete_since)
            if received is None:
                self.close(1002, "incomplete frame timed out")
                return
            data = received
            if not data:
                self._peer_closed.set()
                return

    def _frame_bytes_pending(self) -> bool:
        """Whether wsproto holds part of a frame it has not turned into an event yet.

        wsproto has no public way to ask, so this reads its frame decoder (pinned wsproto
        range); if those internals ever change, it answers False and the deadline falls back
        to "bytes arrived without a complete message".
        """
        decoder = getattr(getattr(self._ws, "_proto", None), "_frame_decoder", None)
        if decoder is None:
            return False
        header: object = getattr(decoder, "header", None)
        buffer: object = getattr(decoder, "buffer", None)
        try:
            buffered = len(buffer)  # type: ignore[arg-type]
        except TypeError:
            buffered = 0
        return header is not None or buffered > 0

    # ------------------------------------------------------------ closing

    async def finish(self, code: int, reason: str) -> None:
        """Close with ``code`` unless a close was sent, flush it, await the peer's close, then return.

        A close the peer started is answered here, with the peer's own code, rather than when
        it arrived. Gives up after the grace period and then arms an abort: the caller's close
        of the TCP stream resets it instead of leaving unsent bytes for a peer that may never
        read them.
        """
        if self._close_reply is not None:
            code, reason = self._close_reply
        self.close(code, reason)
        with trio.move_on_after(self._close_grace_seconds) as grace:
            await self._close_flushed.wait()
            while not self._peer_closed.is_set():
                try:
                    data = await self._stream.receive_some(_RECEIVE_BYTES)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                if not data:
                    return
                try:
                    self._ws.receive_data(bytes(data))
                except LocalProtocolError:
                    return
                for event in self._ws.events():
                    if isinstance(event, CloseConnection):
                        return
        if grace.cancelled_caught and isinstance(self._stream, trio.SocketStream):
            with contextlib.suppress(OSError):
                self._stream.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _frame_header_bytes(payload_bytes: int) -> int:
    """The size of an unmasked (server-to-client) WebSocket frame header (RFC 6455 §5.2)."""
    if payload_bytes < 126:
        return 2
    if payload_bytes < 65_536:
        return 4
    return 10
