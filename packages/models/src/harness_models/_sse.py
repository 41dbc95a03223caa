"""An incremental server-sent-events parser (the WHATWG "event stream" interpretation rules).

Bytes go in as they arrive, in chunks split anywhere; whole events come out. Lines are split
on bytes (CR and LF never occur inside a multi-byte UTF-8 sequence), so a character split
across two chunks simply waits in the partial line, and each complete line is decoded
strictly: invalid UTF-8 is a typed error, not a U+FFFD the adapters would have to notice.
A line or an event longer than its limit is refused (``MODEL_STREAM_TOO_LARGE``) rather than
buffered without end.
"""

from __future__ import annotations

import re
from typing import Final

from harness_models._errors import MODEL_STREAM_INVALID, MODEL_STREAM_TOO_LARGE, ModelError
from harness_models._wire import SseEvent

__all__ = ["DEFAULT_MAX_EVENT_BYTES", "DEFAULT_MAX_LINE_BYTES", "SseParser"]

DEFAULT_MAX_LINE_BYTES: Final = 8 * 1024 * 1024
"""The longest line (without its terminator) a stream may send."""
DEFAULT_MAX_EVENT_BYTES: Final = 8 * 1024 * 1024
"""The most data (the joined ``data`` lines) one event may carry."""

_BOM: Final = b"\xef\xbb\xbf"
_LINE_END: Final = re.compile(rb"\r\n|\r|\n")


def _invalid(message: str) -> ModelError:
    return ModelError(MODEL_STREAM_INVALID, message)


def _too_large(message: str) -> ModelError:
    return ModelError(MODEL_STREAM_TOO_LARGE, message)


class SseParser:
    """Turns chunks of an ``text/event-stream`` body into :class:`SseEvent`\\ s.

    ``id`` is the last event ID seen so far (it persists across events, as the standard
    says), ``None`` until a non-empty one arrives. A ``retry`` field sets
    :attr:`retry_ms`; other unknown fields are ignored.

    Args:
        max_line_bytes: The longest line accepted.
        max_event_bytes: The most data one event may gather.
    """

    __slots__ = (
        "_data",
        "_data_bytes",
        "_event_type",
        "_in_event",
        "_last_id",
        "_max_event_bytes",
        "_max_line_bytes",
        "_partial",
        "_skip_lf",
        "_started",
        "retry_ms",
    )

    def __init__(
        self, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    ) -> None:
        if max_line_bytes < 1 or max_event_bytes < 1:
            raise ValueError("the SSE limits must be positive")
        self._max_line_bytes = max_line_bytes
        self._max_event_bytes = max_event_bytes
        self._partial = b""
        self._started = False  # whether the leading BOM question is settled
        self._skip_lf = False  # the last chunk ended with CR: an LF first in the next one ends nothing
        self._data: list[str] = []
        self._data_bytes = 0
        self._event_type = ""
        self._in_event = False
        self._last_id: str | None = None
        self.retry_ms: int | None = None

    @property
    def at_boundary(self) -> bool:
        """Whether the bytes so far end between events (no partial line, no pending field)."""
        return not self._partial and not self._in_event

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Take the next chunk of the body and return the events it completes.

        Raises:
            ModelError: ``MODEL_STREAM_INVALID`` for invalid UTF-8; ``MODEL_STREAM_TOO_LARGE``
                for a line or event over its limit.
        """
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buffer = self._partial + chunk if self._partial else chunk
        if not self._started:
            if len(buffer) < len(_BOM) and _BOM.startswith(buffer):
                self._partial = buffer  # too short to tell whether a BOM starts the stream
                return []
            self._started = True
            if buffer.startswith(_BOM):
                buffer = buffer[len(_BOM) :]
        lines = buffer.split(b"\n") if b"\r" not in buffer else _LINE_END.split(buffer)
        self._partial = lines.pop()
        if len(self._partial) > self._max_line_bytes:
            raise _too_large(f"a server-sent-events line is longer than {self._max_line_bytes} bytes")
        if buffer.endswith(b"\r"):
            self._skip_lf = True
        events: list[SseEvent] = []
        for line in lines:
            # The common lines inline: an empty line ends the event, "data: …" adds to it;
            # every other line (and any check that could fail) goes through _line.
            if not line:
                event = self._dispatch()
                if event is not None:
                    events.append(event)
            elif line.startswith(b"data: ") and len(line) <= self._max_line_bytes:
                self._data_bytes += len(line) - 3  # as _line counts it: len(raw) - len("data") + 1
                if self._data_bytes > self._max_event_bytes:
                    raise _too_large(f"a server-sent event carries more than {self._max_event_bytes} bytes")
                try:
                    self._data.append(line[6:].decode("utf-8"))
                except UnicodeDecodeError:
                    raise _invalid("the server-sent-events stream is not valid UTF-8") from None
                self._in_event = True
            else:
                event = self._line(line)
                if event is not None:
                    events.append(event)
        return events

    def _line(self, raw: bytes) -> SseEvent | None:
        if not raw:
            return self._dispatch()
        if len(raw) > self._max_line_bytes:
            raise _too_large(f"a server-sent-events line is longer than {self._max_line_bytes} bytes")
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _invalid("the server-sent-events stream is not valid UTF-8") from None
        if line[0] == ":":  # a comment (keep-alive pings)
            return None
        self._in_event = True
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data_bytes += len(raw) - len(field) + 1  # a bound on the value and its "\n"
            if self._data_bytes > self._max_event_bytes:
                raise _too_large(f"a server-sent event carries more than {self._max_event_bytes} bytes")
            self._data.append(value)
        elif field == "event":
            self._event_type = value
        elif field == "id":
            if "\x00" not in value:
                self._last_id = value or None
        elif field == "retry" and value.isascii() and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> SseEvent | None:
        data, event_type = self._data, self._event_type
        self._data, self._data_bytes, self._event_type, self._in_event = [], 0, "", False
        if not data:
            return None
        return SseEvent(event=event_type or "message", data="\n".join(data), id=self._last_id)
