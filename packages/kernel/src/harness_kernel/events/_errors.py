"""The four typed errors of event decoding, one per gate (spec §2.2)."""

from __future__ import annotations

from typing import Final

from harness_kernel._errors import HarnessError

__all__ = [
    "EVT_BAD_JSON",
    "EVT_BAD_PAYLOAD",
    "EVT_UNKNOWN_TYPE",
    "EVT_UNSUPPORTED_VERSION",
    "EventParseError",
    "EventSchemaError",
    "EventVersionError",
    "SchemaIssue",
    "UnknownEventTypeError",
]

EVT_BAD_JSON: Final = "EVT_BAD_JSON"
EVT_UNSUPPORTED_VERSION: Final = "EVT_UNSUPPORTED_VERSION"
EVT_UNKNOWN_TYPE: Final = "EVT_UNKNOWN_TYPE"
EVT_BAD_PAYLOAD: Final = "EVT_BAD_PAYLOAD"

SchemaIssue = tuple[str, str]
"""``(path, message)``: a dotted wire path (``data.usage.promptTokens``) and what is wrong."""

_ISSUES_IN_MESSAGE: Final = 10


class EventParseError(HarnessError):
    """Gate 1: the input is not JSON, not a JSON object, or nested too deep to decode."""

    def __init__(self, message: str) -> None:
        super().__init__(EVT_BAD_JSON, message)


class EventVersionError(HarnessError):
    """Gate 2: ``v`` is missing or is not exactly the integer 1.

    Attributes:
        version: The ``v`` found (``None`` when missing).
        raw: The decoded JSON object.
    """

    version: object
    raw: dict[str, object]

    def __init__(self, version: object, raw: dict[str, object]) -> None:
        missing = "v" not in raw
        super().__init__(
            EVT_UNSUPPORTED_VERSION,
            "event version is missing" if missing else f"unsupported event version: {_short(version)}",
        )
        self.version = version
        self.raw = raw


class UnknownEventTypeError(HarnessError):
    """Gate 3: ``type`` is not the name of a known event type.

    Attributes:
        type: The ``type`` found (``None`` when missing).
        raw: The decoded JSON object.
    """

    type: object
    raw: dict[str, object]

    def __init__(self, event_type: object, raw: dict[str, object]) -> None:
        super().__init__(EVT_UNKNOWN_TYPE, f"unknown event type: {_short(event_type)}")
        self.type = event_type
        self.raw = raw


class EventSchemaError(HarnessError):
    """Gate 4: the envelope or the payload breaks the schema.

    Attributes:
        type: The (known) event type.
        issues: Every problem found, as ``(path, message)`` pairs in a stable order.
    """

    type: str
    issues: tuple[SchemaIssue, ...]

    def __init__(self, event_type: str, issues: tuple[SchemaIssue, ...]) -> None:
        shown = "; ".join(f"{path} {message}" for path, message in issues[:_ISSUES_IN_MESSAGE])
        more = len(issues) - _ISSUES_IN_MESSAGE
        tail = f"; and {more} more" if more > 0 else ""
        super().__init__(EVT_BAD_PAYLOAD, f"invalid {event_type} event: {shown}{tail}")
        self.type = event_type
        self.issues = issues


def _short(value: object) -> str:
    """A bounded ``repr`` of a decoded JSON value (only JSON types reach here)."""
    if type(value) is int and not -(10**40) < value < 10**40:
        return "an integer of more than 40 digits"  # repr of a huge int can even raise
    text = repr(value) if type(value) in (str, int, float, bool) or value is None else type(value).__name__
    return text if len(text) <= 80 else text[:77] + "..."
