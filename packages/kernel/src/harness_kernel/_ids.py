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
    raw = bytearray(secrets.token_bytes(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    text = raw.hex()
    return f"{prefix}-{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def format_timestamp(moment: datetime) -> str:
    """``moment`` in UTC as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (a naive time is taken as UTC)."""
    utc = moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)
    # isoformat pads the year to four digits (strftime's %Y does not below 1000) and
    # truncates, never rounds, to milliseconds.
    return utc.isoformat(timespec="milliseconds") + "Z"


def now_timestamp() -> str:
    """Now, as :func:`format_timestamp` spells it."""
    return format_timestamp(datetime.now(UTC))
