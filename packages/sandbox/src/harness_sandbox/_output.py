"""One command output stream, bounded: its head and its tail are kept, the middle is counted."""

from __future__ import annotations

import codecs
from typing import Final

import trio

__all__ = ["BoundedOutput"]

_READ_CHUNK_BYTES: Final = 64 * 1024


class BoundedOutput:
    """Keeps the first and the last ``cap // 2`` bytes of a stream; what lies between is dropped.

    A failing test run prints its summary last and its first error first, so both ends are
    worth more than the middle.

    Args:
        cap: The bytes kept in all (at least 2).
    """

    def __init__(self, cap: int) -> None:
        if type(cap) is not int or cap < 2:
            raise ValueError(f"cap must be an int >= 2, got {cap!r}")
        self._head_cap = cap - cap // 2
        self._tail_cap = cap // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        """Bytes read and discarded between the head and the tail."""
        self.closed = trio.Event()
        """Set when the stream reached end of file."""

    @property
    def truncated(self) -> bool:
        """Whether any byte was dropped."""
        return self.dropped > 0

    def feed(self, chunk: bytes | bytearray) -> None:
        """Take the next bytes of the stream."""
        room = self._head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self.tail += chunk
        excess = len(self.tail) - self._tail_cap
        if excess > 0:
            del self.tail[:excess]
            self.dropped += excess

    async def drain(self, stream: trio.abc.ReceiveStream) -> None:
        """Read ``stream`` to end of file."""
        while chunk := await stream.receive_some(_READ_CHUNK_BYTES):
            self.feed(chunk)
        self.closed.set()

    def text(self, name: str) -> str:
        """The kept bytes as UTF-8 (invalid sequences replaced), with a notice where bytes were cut.

        Args:
            name: The stream's name for the notice (``"stdout"``).
        """
        if not self.truncated:
            return bytes(self.head + self.tail).decode("utf-8", errors="replace")
        # A cut may fall inside a character: the head drops an unfinished last character,
        # the tail a first one that began in the dropped middle.
        head = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(bytes(self.head), final=False)
        tail = bytes(self.tail)
        start = 0
        while start < min(4, len(tail)) and tail[start] & 0xC0 == 0x80:
            start += 1
        notice = f"\n[{name} truncated: {self.dropped} bytes in the middle were discarded]\n"
        return head + notice + tail[start:].decode("utf-8", errors="replace")
