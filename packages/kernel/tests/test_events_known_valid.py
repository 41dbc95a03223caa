"""An event the codec built is validated once: it is deeply immutable, so it stays valid.

``validate_event`` (and so ``serialize_event``, the stores and ``redact_event``) returns such
an event as it is; an ``Event`` built by hand is checked in full every time.
"""

from __future__ import annotations

import gc
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness_kernel.events import (
    Event,
    EventParseError,
    EventSchemaError,
    ToolCallData,
    create_event,
    deserialize_event,
    redact_event,
    serialize_event,
)
from harness_kernel.events._codec import validate_event


def _call(arguments: dict[str, object]) -> Event:
    return create_event("tool.call", {"callId": "c", "tool": "t", "input": arguments}, event_id="e", at=_AT)


_AT = "2024-05-01T12:30:00.125Z"


def test_codec_built_events_are_returned_as_they_are() -> None:
    created = _call({"a": [1, 2]})
    assert validate_event(created) is created
    decoded = deserialize_event(serialize_event(created))
    assert decoded is not created
    assert validate_event(decoded) is decoded


def test_a_hand_built_event_is_checked_in_full_every_time() -> None:
    valid = _call({"a": 1})
    by_hand = Event(v=1, type="tool.call", event_id="e", at=_AT, data=valid.data)
    copy = validate_event(by_hand)
    assert copy is not by_hand
    assert copy == by_hand
    assert validate_event(copy) is copy
    assert validate_event(by_hand) is not by_hand  # still unknown: checked again
    broken = Event(v=1, type="tool.call", event_id="", at=_AT, data=valid.data)
    for _ in range(2):
        with pytest.raises(EventSchemaError):
            validate_event(broken)
        with pytest.raises(EventSchemaError):
            serialize_event(broken)


def test_a_hand_built_event_holding_mutable_or_non_json_data_is_refused() -> None:
    nan = Event(
        v=1,
        type="tool.call",
        event_id="e",
        at=_AT,
        data=ToolCallData(call_id="c", tool="t", input={"x": math.nan}),  # pyright: ignore[reportArgumentType]
    )
    with pytest.raises(EventParseError):
        validate_event(nan)
    with pytest.raises(EventParseError):
        redact_event(nan)


def test_a_forgotten_event_leaves_the_registry_and_its_id_can_be_reused_safely() -> None:
    for _ in range(20):
        made = _call({"n": 1})
        del made
        gc.collect()
        valid = _call({"n": 1})
        by_hand = Event(v=1, type="tool.call", event_id="", at=_AT, data=valid.data)
        # Whatever id the collector hands out again, an unvalidated object is never taken as valid.
        with pytest.raises(EventSchemaError):
            validate_event(by_hand)


def test_redaction_that_changes_nothing_returns_the_event_itself() -> None:
    clean = _call({"path": "notes.txt", "count": 3})
    assert redact_event(clean) is clean
    secret = _call({"headers": {"Authorization": "Bearer abcdef"}})
    redacted = redact_event(secret)
    assert redacted is not secret
    assert redacted.data != secret.data


@given(
    st.dictionaries(
        st.sampled_from(["path", "note", "token", "apiKey", "text", "url"]),
        st.one_of(st.integers(-5, 5), st.booleans(), st.none(), st.text(max_size=30)),
        max_size=4,
    )
)
def test_redaction_is_the_same_with_and_without_the_fast_path(arguments: dict[str, object]) -> None:
    event = _call(arguments)
    by_hand = Event(v=1, type="tool.call", event_id="e", at=_AT, data=event.data)
    fast = redact_event(event)
    slow = redact_event(by_hand)
    assert serialize_event(fast) == serialize_event(slow)
    assert (fast is event) == (fast.data == event.data)
