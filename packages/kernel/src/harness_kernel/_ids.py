"""Ids and timestamps as every event, store and loop of the kernel spells them.

One definition each, re-exported publicly by :mod:`harness_kernel.events` for the server and
the exit gate: an id is an exact ``str`` of 1..256 code points, not only whitespace; a
timestamp is UTC, ISO 8601 / RFC 3339 with milliseconds and ``Z``.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Final

__all__ = ["MAX_ID_CHARS", "format_timestamp", "is_id", "now_timestamp", "random_id"]

MAX_ID_CHARS: Final = 256


def is_id(value: object) -> bool:
    """Whether ``value`` is an exact ``str`` of 1..256 code points, not only whitespace."""
    return type(value) is str and 1 <= len(value) <= MAX_ID_CHARS and bool(value.strip())


def random_id(prefix: str) -> str:
    """``f"{prefix}-{uuid4()}"``: the default id of every run, session, event and call.

    The uuid4 text is spelled here from 16 random bytes (version 4, RFC 4122 variant), the
    same form ``uuid.uuid4()`` gives at half its cost (the runtime makes ids for every event).
    """
    text = secrets.token_hex(16)
    # The version nibble is 4; the variant nibble keeps its two low bits under 0b10.
    variant = _VARIANT_NIBBLES[int(text[16], 16) & 3]
    return f"{prefix}-{text[:8]}-{text[8:12]}-4{text[13:16]}-{variant}{text[17:20]}-{text[20:]}"


_VARIANT_NIBBLES: Final = "89ab"


def format_timestamp(moment: datetime) -> str:
    """``moment`` in UTC as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (a naive time is taken as UTC)."""
    utc = moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)
    # isoformat pads the year to four digits (strftime's %Y does not below 1000) and
    # truncates, never rounds, to milliseconds.
    return utc.isoformat(timespec="milliseconds") + "Z"


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_current_second: list[tuple[datetime, str]] = [(_EPOCH, format_timestamp(_EPOCH)[:-5])]
"""The last whole second :func:`now_timestamp` spelled, and its text up to the seconds."""


def now_timestamp() -> str:
    """Now, as :func:`format_timestamp` spells it.

    The text up to the seconds is spelled once per second and reused: the runtime stamps
    every event, and formatting a whole timestamp cost more than the rest of the stamp.
    """
    moment = datetime.now(UTC)
    second = moment.replace(microsecond=0)
    cached = _current_second[0]
    if cached[0] != second:
        cached = (second, format_timestamp(second)[:-5])
        _current_second[0] = cached
    return f"{cached[1]}.{moment.microsecond // 1000:03d}Z"
