"""The text of one answer as both adapters hand it on: bounded, and without the adapter's key.

A provider may stream text without end, or echo the key it was sent (a hostile or broken
one). Both are settled here, before a frame leaves the adapter, so that every consumer (the
events a client receives, the stored copy, the completed message) sees the same text:

- every delta is counted against ``StreamLimits.max_text_bytes`` before it is kept, and
  crossing the limit is ``MODEL_STREAM_TOO_LARGE``;
- the key is replaced by ``[REDACTED]`` wherever it occurs in the joined text, even split
  over many deltas: the end of the text that could still begin the key is held back until
  the next delta (or the end of the answer) shows it is not the key.
"""

from __future__ import annotations

from typing import Final

from harness_kernel.events import REDACTED
from harness_kernel.models import TextDeltaFrame, normalize_model_text_deltas
from harness_models._errors import MODEL_STREAM_TOO_LARGE, ModelError

__all__ = ["MIN_SECRET_CHARS", "AnswerText", "stream_too_large", "too_many_events", "utf8_length"]

MIN_SECRET_CHARS: Final = 8
"""A shorter key is not looked for in the text: blanking it would mangle ordinary words."""


def utf8_length(text: str) -> int:
    """The UTF-8 length of ``text`` (its length when ASCII, which CPython knows at once)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def stream_too_large(what: str, limit: int) -> ModelError:
    """The ``MODEL_STREAM_TOO_LARGE`` error of a response past its ``limit`` of ``what``."""
    return ModelError(
        MODEL_STREAM_TOO_LARGE, f"the model's response carries more than {limit} bytes of {what}"
    )


def too_many_events(limit: int) -> ModelError:
    """The ``MODEL_STREAM_TOO_LARGE`` error of a response of more than ``limit`` events."""
    return ModelError(MODEL_STREAM_TOO_LARGE, f"the model's response carries more than {limit} events")


def _start_of_secret(text: str, secret: str) -> int:
    """How many characters at the end of ``text`` could be the start of ``secret``."""
    index = text.find(secret[0], max(0, len(text) - len(secret) + 1))
    while index != -1:
        if secret.startswith(text[index:]):
            return len(text) - index
        index = text.find(secret[0], index + 1)
    return 0


class AnswerText:
    """Counts, scrubs and keeps the text of one response.

    Args:
        max_bytes: The most UTF-8 bytes of text the response may carry.
        secret: The adapter's key, replaced wherever the text carries it (``None``: no key,
            or one too short to look for).
    """

    __slots__ = ("_bytes", "_held", "_max_bytes", "_parts", "_secret")

    def __init__(self, *, max_bytes: int, secret: str | None) -> None:
        self._max_bytes = max_bytes
        self._secret = secret if secret is not None and len(secret) >= MIN_SECRET_CHARS else None
        self._bytes = 0
        self._held = ""
        self._parts: list[str] = []

    def add(self, text: str) -> list[TextDeltaFrame]:
        """The frames of one delta from the provider (none while it may begin the key).

        Raises:
            ModelError: ``MODEL_STREAM_TOO_LARGE`` when the text crosses ``max_bytes``.
        """
        self._bytes += utf8_length(text)
        if self._bytes > self._max_bytes:
            raise stream_too_large("text", self._max_bytes)
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
