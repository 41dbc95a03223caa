"""The id and timestamp spellings ``harness_kernel.events`` publishes for producers outside it."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Final

from hypothesis import given, settings
from hypothesis import strategies as st

from harness_kernel.events import create_event, format_timestamp, now_timestamp, random_id

SPELLING: Final = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
SETTINGS: Final = settings(max_examples=200, deadline=None, database=None)


def test_format_timestamp_spells_utc_with_milliseconds_and_z() -> None:
    moment = datetime(2026, 3, 4, 5, 6, 7, 890_123, tzinfo=UTC)
    assert format_timestamp(moment) == "2026-03-04T05:06:07.890Z"


def test_format_timestamp_truncates_microseconds_instead_of_rounding() -> None:
    assert format_timestamp(datetime(2026, 1, 1, 0, 0, 0, 999_999, tzinfo=UTC)) == "2026-01-01T00:00:00.999Z"


def test_format_timestamp_pads_a_year_below_1000_to_four_digits() -> None:
    # strftime's %Y spelled year 999 as "999", which no event accepts as a timestamp.
    text = format_timestamp(datetime(999, 1, 1, tzinfo=UTC))
    assert text == "0999-01-01T00:00:00.000Z"
    assert create_event("task.updated", {"taskId": "t", "phase": "planned"}, at=text).at == text


def test_format_timestamp_takes_a_naive_time_as_utc() -> None:
    assert format_timestamp(datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05.000Z"


def test_format_timestamp_converts_an_offset_time_to_utc() -> None:
    east = timezone(timedelta(hours=5, minutes=30))
    assert format_timestamp(datetime(2026, 1, 1, 2, 0, 0, tzinfo=east)) == "2025-12-31T20:30:00.000Z"


@SETTINGS
@given(
    moment=st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.sampled_from([UTC, timezone(timedelta(hours=-11)), timezone(timedelta(hours=14))]),
    )
)
def test_format_timestamp_names_the_same_instant_to_the_millisecond(moment: datetime) -> None:
    text = format_timestamp(moment)
    assert SPELLING.fullmatch(text)
    back = datetime.fromisoformat(text.replace("Z", "+00:00"))
    assert timedelta(0) <= moment - back < timedelta(milliseconds=1)


def test_now_timestamp_is_now_and_is_an_event_timestamp() -> None:
    before = datetime.now(UTC) - timedelta(milliseconds=1)
    text = now_timestamp()
    after = datetime.now(UTC)
    assert SPELLING.fullmatch(text)
    assert before <= datetime.fromisoformat(text.replace("Z", "+00:00")) <= after
    event = create_event("task.updated", {"taskId": "t", "phase": "planned"}, at=text)
    assert event.at == text


@SETTINGS
@given(prefix=st.sampled_from(["run", "sess", "evt", "call", "connection"]))
def test_random_id_is_the_prefix_then_a_fresh_uuid4(prefix: str) -> None:
    first, second = random_id(prefix), random_id(prefix)
    assert first != second
    head, _, tail = first.partition("-")
    assert head == prefix
    assert uuid.UUID(tail).version == 4
    assert str(uuid.UUID(tail)) == tail
