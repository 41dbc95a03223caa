"""One answer as both adapters take it in: bounded, and its text without the adapter's key.

A provider may stream without end, or echo the key it was sent (a hostile or broken one).
Both are settled here, before a frame leaves the adapter, so that every consumer (the events
a client receives, the stored copy, the completed message) sees the same text:

- every event, text delta and argument fragment is counted against its ``StreamLimits``
  limit before it is kept, and crossing one is ``MODEL_STREAM_TOO_LARGE``;
- the key is replaced by ``[REDACTED]`` wherever it occurs in the joined text, even split
  over many deltas: the end of the text that could still begin the key is held back until
  the next delta (or the end of the answer) shows it is not the key.
"""

from __future__ import annotations

from typing import Final

from harness_kernel.events import REDACTED
from harness_kernel.models import TextDeltaFrame, normalize_model_text_deltas
from harness_models._errors import MODEL_STREAM_TOO_LARGE, ModelError
from harness_models._wire import StreamLimits

__all__ = ["MIN_SECRET_CHARS", "Answer", "utf8_length"]

MIN_SECRET_CHARS: Final = 8
"""A shorter key is not looked for in the text: blanking it would mangle ordinary words."""


def utf8_length(text: str) -> int:
    """The UTF-8 length of ``text`` (its length when ASCII, which CPython knows at once)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _too_large(what: str) -> ModelError:
    return ModelError(MODEL_STREAM_TOO_LARGE, f"the model's response carries more than {what}")


def _start_of_secret(text: str, secret: str) -> int:
    """How many characters at the end of ``text`` could be the start of ``secret``."""
    index = text.find(secret[0], max(0, len(text) - len(secret) + 1))
    while index != -1:
        if secret.startswith(text[index:]):
            return len(text) - index
        index = text.find(secret[0], index + 1)
    return 0


class Answer:
    """Counts one response against its limits; scrubs and keeps its text.

    Args:
        limits: The most events, text and argument bytes the response may carry.
        secret: The adapter's key, replaced wherever the text carries it (``None``: no key,
            or one too short to look for).
    """

    __slots__ = ("_argument_bytes", "_events", "_held", "_limits", "_parts", "_secret", "_text_bytes")

    def __init__(self, limits: StreamLimits, *, secret: str | None) -> None:
        self._limits = limits
        self._secret = secret if secret is not None and len(secret) >= MIN_SECRET_CHARS else None
        self._events = 0
        self._argument_bytes = 0
        self._text_bytes = 0
        self._held = ""
        self._parts: list[str] = []

    def count_event(self) -> None:
        """Count one server-sent event of the response, whatever it carries.

        Raises:
            ModelError: ``MODEL_STREAM_TOO_LARGE`` past ``max_events``.
        """
        self._events += 1
        if self._events > self._limits.max_events:
            raise _too_large(f"{self._limits.max_events} events")

    def count_arguments(self, fragment: str) -> None:
        """Count one fragment of a tool call's arguments (the caller keeps it).

        Raises:
            ModelError: ``MODEL_STREAM_TOO_LARGE`` past ``max_argument_bytes``, all calls together.
        """
        self._argument_bytes += utf8_length(fragment)
        if self._argument_bytes > self._limits.max_argument_bytes:
            raise _too_large(f"{self._limits.max_argument_bytes} bytes of tool-call arguments")

    def add(self, text: str) -> list[TextDeltaFrame]:
        """The frames of one text delta from the provider (none while it may begin the key).

        Raises:
            ModelError: ``MODEL_STREAM_TOO_LARGE`` past ``max_text_bytes``.
        """
        self._text_bytes += utf8_length(text)
        if self._text_bytes > self._limits.max_text_bytes:
            raise _too_large(f"{self._limits.max_text_bytes} bytes of text")
        secret = self._secret
        if secret is None:
            return self._handed_on(text)
        text = (self._held + text).replace(secret, REDACTED)
        held = _start_of_secret(text, secret)
        self._held = text[len(text) - held :] if held else ""
        return self._handed_on(text[: len(text) - held])

    def end(self) -> list[TextDeltaFrame]:
        """The frames of the text held back, once the provider sent its last delta."""
        held, self._held = self._held, ""
        return self._handed_on(held)

    @property
    def content(self) -> str:
        """Every piece handed on so far, joined: the completed message's content."""
        return "".join(self._parts)

    def _handed_on(self, text: str) -> list[TextDeltaFrame]:
        if not text:
            return []
        self._parts.append(text)
        return [TextDeltaFrame(piece) for piece in normalize_model_text_deltas((text,))]
