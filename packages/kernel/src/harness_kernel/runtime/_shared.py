"""What every step of a run shares: the limits of spec §8, the text cut, the budget percentage,
the ids every run event carries and the internal signal of an observed cancellation."""

from __future__ import annotations

from typing import Final, TypedDict, TypeVar

from msgspec import UNSET, UnsetType

T = TypeVar("T")

__all__ = [
    "CLEANUP_GRACE",
    "FINISHED",
    "MAX_CALLS",
    "MAX_CONTENT",
    "MAX_DELTA",
    "MAX_TRANSCRIPT_BYTES",
    "Canceled",
    "RunIds",
    "or_unset",
]

MAX_CONTENT: Final = 16 * 1_048_576
MAX_DELTA: Final = 1_048_576
MAX_CALLS: Final = 128
MAX_TRANSCRIPT_BYTES: Final = 4 * 1_048_576
"""The tool transcript (call arguments and results, as JSON) of one run."""
CLEANUP_GRACE: Final = 0.1
"""Seconds a model stream's ``aclose`` may take once the round is over."""
FINISHED: Final = frozenset({"completed", "failed", "canceled", "budget_exceeded"})


class Canceled(Exception):
    """Internal: the run's cancellation was observed; the producer ends with the canceled pair."""


class RunIds(TypedDict):
    """The ids every run event's payload carries; unpack it into a payload Struct."""

    run_id: str
    session_id: str
    turn_id: str


def or_unset(value: T | None) -> T | UnsetType:
    """An optional payload field: ``None`` leaves it out of the event."""
    return UNSET if value is None else value
