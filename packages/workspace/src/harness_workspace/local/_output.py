"""One command output stream, bounded: its head and its tail are kept, the middle is counted."""

from __future__ import annotations

import codecs
from typing import Final

import trio

__all__ = ["HeadTailOutput"]

_READ_CHUNK_BYTES: Final = 64 * 1024
# A UTF-8 character is at most four bytes: a lead byte and up to three continuation bytes.
_MAX_CONTINUATION_BYTES: Final = 3


class HeadTailOutput:
    """One output stream kept within ``cap`` bytes: its first bytes and its last, not the middle.

    The head holds the first ``cap - cap // 2`` bytes, the tail the last ``cap // 2``; what
    lies between is read, counted and dropped. A failing test run prints its first error
    first and its summary last, so both ends are worth more than the middle. The tail is a
    bounded buffer: however long the stream, at most ``cap`` bytes (and one chunk while it is
    being trimmed) are held. An :class:`~harness_workspace.local.OutputSink`, for
    :func:`~harness_workspace.local.supervise_process`.

    Args:
        cap: The bytes kept in all (``0`` keeps nothing and reports every byte as dropped).

    Raises:
        ValueError: ``cap`` is not a nonnegative ``int``.
    """

    def __init__(self, cap: int) -> None:
        if type(cap) is not int or cap < 0:
            raise ValueError(f"HeadTailOutput cap must be a nonnegative int, got {cap!r}")
        self._head_cap = cap - cap // 2
        self._tail_cap = cap // 2
        self._head = bytearray()
        self._tail = bytearray()
        self._dropped = 0
        self._closed = trio.Event()

    @property
    def closed(self) -> trio.Event:
        """Set when :meth:`drain` reached end of file."""
        return self._closed

    @property
    def dropped(self) -> int:
        """Bytes read and discarded between the head and the tail (before any character cut)."""
        return self._dropped

    @property
    def kept_bytes(self) -> int:
        """Bytes held right now, head and tail together; never more than the cap between feeds."""
        return len(self._head) + len(self._tail)

    @property
    def truncated(self) -> bool:
        """Whether any byte of the stream was dropped."""
        return self._dropped > 0

    def feed(self, chunk: bytes | bytearray | memoryview) -> None:
        """Take the next bytes of the stream."""
        view = memoryview(chunk).cast("B")
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += view[:room]
            view = view[room:]
        if not view:
            return
        if len(view) >= self._tail_cap:
            # The chunk alone fills the tail: everything held before it leaves.
            self._dropped += len(self._tail) + len(view) - self._tail_cap
            self._tail = bytearray(view[len(view) - self._tail_cap :])
            return
        self._tail += view
        excess = len(self._tail) - self._tail_cap
        if excess > 0:
            del self._tail[:excess]
            self._dropped += excess

    async def drain(self, stream: trio.abc.ReceiveStream) -> None:
        """Read ``stream`` to end of file, then set :attr:`closed`."""
        while chunk := await stream.receive_some(_READ_CHUNK_BYTES):
            self.feed(chunk)
        self._closed.set()

    def text(self, name: str) -> str:
        """The kept bytes as UTF-8 (invalid sequences replaced), with a notice where bytes were cut.

        Neither cut splits a character: the head gives up an unfinished last character and
        the tail the continuation bytes of a character that began in the middle. Those bytes
        are counted in the notice, which therefore states exactly how many bytes of the
        stream the text does not show. The notice is a line of its own: the head, a newline,
        the notice, a newline, the tail. Both newlines are the notice's, never the stream's
        (a head that ended a line therefore shows a blank one)::

            [stdout truncated: 2097152 bytes in the middle were discarded]

        Args:
            name: The stream's name for the notice (``"stdout"``).
        """
        if not self.truncated:
            return bytes(self._head + self._tail).decode("utf-8", errors="replace")
        head_decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        head = head_decoder.decode(bytes(self._head), final=False)
        unfinished, _ = head_decoder.getstate()
        start = 0
        while start < min(_MAX_CONTINUATION_BYTES, len(self._tail)) and self._tail[start] & 0xC0 == 0x80:
            start += 1
        tail = bytes(self._tail[start:]).decode("utf-8", errors="replace")
        omitted = self._dropped + len(unfinished) + start
        return f"{head}\n[{name} truncated: {omitted} bytes in the middle were discarded]\n{tail}"
