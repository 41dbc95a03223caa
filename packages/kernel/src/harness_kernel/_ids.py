"""Ids and timestamps as every event, store and loop of the kernel spells them.

One definition each, re-exported publicly by :mod:`harness_kernel.events` for the server and
the exit gate: an id is an exact ``str`` of 1..256 code points, not only whitespace; a
timestamp is UTC, ISO 8601 / RFC 3339 with milliseconds and ``Z``.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Final

__all__ = ["MAX_ID_CHARS", "format_timestamp", "is_id", "now_timestamp", "random_id"]

MAX_ID_CHARS: Final = 256


def is_id(value: object) -> bool:
    """Whether ``value`` is an exact ``str`` of 1..256 code points, not only whitespace."""
    return type(value) is str and 1 <= len(value) <= MAX_ID_CHARS and bool(value.strip())


def random_id(prefix: str) -> str:
    """``f"{prefix}-{uuid4()}"``: the default id of every run, session, event and call."""
    return f"{prefix}-{uuid.uuid4()}"


def format_timestamp(moment: datetime) -> str:
    """``moment`` in UTC as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (a naive time is taken as UTC)."""
    utc = moment if moment.tzinfo is None else moment.astimezone(UTC).replace(tzinfo=None)
    # isoformat pads the year to four digits (strftime's %Y does not below 1000) and
    # truncates, never rounds, to milliseconds.
    return utc.isoformat(timespec="milliseconds") + "Z"


def now_timestamp() -> str:
    """Now, as :func:`format_timestamp` spells it."""
    return format_timestamp(datetime.now(UTC))
