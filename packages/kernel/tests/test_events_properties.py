"""Properties of the event codec: byte-stable round trips, and only typed errors on any input."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Final

import kernel_event_examples as examples
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_kernel.events import (
    Event,
    EventParseError,
    EventSchemaError,
    EventVersionError,
    UnknownEventTypeError,
    create_event,
    deserialize_event,
    serialize_event,
)
from harness_kernel.events._model import EVENT_TYPES

MAX_SAFE: Final = 2**53 - 1
TYPED_ERRORS: Final = (EventParseError, EventVersionError, UnknownEventTypeError, EventSchemaError)
SETTINGS: Final = settings(max_examples=150, deadline=None, database=None)

# Free-form fields of the catalogue, by the kind of value they accept whatever the type.
TEXT_FIELDS: Final = frozenset({"note", "reason", "subject", "message"})
BODY_FIELDS: Final = frozenset({"delta", "summary"})
NAME_FIELDS: Final = frozenset(
    {
        "model",
        "tool",
        "name",
        "action",
        "image",
        "containerName",
        "bucket",
        "key",
        "contentType",
        "reportPath",
        "manifestDigest",
        "code",
        "workspace",
    }
)
COUNT_FIELDS: Final = frozenset(
    {
        "steps",
        "toolCalls",
        "availableEvents",
        "sequence",
        "modelRequests",
        "bytes",
        "eventCount",
        "mounts",
        "messageRevision",
        "promptTokens",
        "completionTokens",
        "totalTokens",
    }
)
NUMBER_FIELDS: Final = frozenset({"durationMs", "used", "limit", "pct"})
JSON_FIELDS: Final = frozenset({"input", "output"})

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE, MAX_SAFE)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
numbers = st.integers(0, MAX_SAFE) | st.floats(min_value=0, allow_nan=False, allow_infinity=False)


@st.composite
def timestamps(draw: st.DrawFn) -> str:
    moment = draw(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)))
    text = f"{moment.year:04d}-" + moment.strftime("%m-%dT%H:%M:%S")
    if draw(st.booleans()):
        text += "." + draw(st.text("0123456789", min_size=1, max_size=9))
    minutes = draw(st.integers(-(23 * 60 + 59), 23 * 60 + 59))
    if minutes == 0 and draw(st.booleans()):
        return text + "Z"
    offset = datetime(2000, 1, 1, tzinfo=timezone(timedelta(minutes=minutes))).strftime("%z")
    return f"{text}{offset[:3]}:{offset[3:]}"


def vary(key: str, value: object, draw: st.DrawFn) -> object:
    """A new value for a free-form field, or the example's value for constrained ones."""
    if key.endswith("Id") or key in NAME_FIELDS:
        return draw(st.text(min_size=1, max_size=16))
    if key in TEXT_FIELDS:
        return draw(st.text(max_size=16))
    if key in BODY_FIELDS or (key == "content" and value != ""):
        return draw(st.text(min_size=1, max_size=32))
    if key in COUNT_FIELDS:
        return draw(st.integers(0, MAX_SAFE))
    if key in NUMBER_FIELDS:
        return draw(numbers)
    if key in JSON_FIELDS:
        return draw(json_values)
    if isinstance(value, dict):
        return {inner_key: vary(inner_key, inner, draw) for inner_key, inner in value.items()}  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return value


@st.composite
def valid_documents(draw: st.DrawFn) -> dict[str, object]:
    _, event_type, data = draw(st.sampled_from(examples.EXAMPLES))
    varied = {key: vary(key, value, draw) for key, value in data.items()}
    envelope: dict[str, object] = {
        "eventId": draw(st.text(min_size=1, max_size=40)),
        "at": draw(timestamps()),
    }
    if draw(st.booleans()):
        envelope["actor"] = draw(st.text(min_size=1, max_size=10))
    document = examples.document(event_type, varied, **envelope)
    if "actor" not in envelope:
        del document["actor"]
    return document


@SETTINGS
@given(valid_documents())
def test_valid_events_round_trip_byte_for_byte(document: dict[str, object]) -> None:
    data = document["data"]
    assert isinstance(data, dict)
    event = create_event(
        document["type"],  # pyright: ignore[reportArgumentType]
        data,  # pyright: ignore[reportUnknownArgumentType]
        event_id=document["eventId"],  # pyright: ignore[reportArgumentType]
        at=document["at"],  # pyright: ignore[reportArgumentType]
        actor=document.get("actor"),  # pyright: ignore[reportArgumentType]
    )
    raw = serialize_event(event)
    assert deserialize_event(raw) == event
    assert serialize_event(deserialize_event(raw)) == raw
    assert deserialize_event(document) == event
    assert json.loads(raw) == json.loads(json.dumps(document))


WIRE_KEYS: Final = sorted({key for _, _, data in examples.EXAMPLES for key in data} | {"role", "x"})

noise = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["", "user", "assistant", "tool", "running", "leased", examples.AT, examples.SHA]),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.sampled_from(WIRE_KEYS), children, max_size=6)
    ),
    max_leaves=16,
)
non_json = st.sampled_from([{1, 2}, b"x", object(), (1, 2), float("nan"), {1: 2}, 2**70])


@st.composite
def envelope_like(draw: st.DrawFn) -> dict[str, object]:
    document: dict[str, object] = {
        "v": draw(st.sampled_from([1, 1, 1, True, 1.0, 2, None, "1"])),
        "type": draw(st.sampled_from([*EVENT_TYPES, "nope", 3])),
        "eventId": draw(st.sampled_from(["e", "", 5])),
        "at": draw(st.sampled_from([examples.AT, "2024-02-30T00:00:00Z", ""])),
    }
    _, _, example = draw(st.sampled_from(examples.EXAMPLES))
    data = dict(example)
    for key in draw(st.lists(st.sampled_from(WIRE_KEYS), max_size=3)):
        data[key] = draw(noise | non_json)
    for key in draw(st.lists(st.sampled_from(sorted(data)), max_size=2)):
        data.pop(key, None)
    document["data"] = data if draw(st.integers(0, 9)) else draw(noise)
    if draw(st.booleans()):
        document[draw(st.sampled_from(["actor", "extra", "data"]))] = draw(noise)
    return document


def _encoded(document: dict[str, object]) -> bytes:
    try:
        return json.dumps(document).encode()
    except (TypeError, ValueError):
        return b"{"


any_input = (
    st.binary(max_size=64)
    | st.text(max_size=64)
    | noise
    | envelope_like()
    | envelope_like().map(_encoded)
    | envelope_like().map(lambda document: _encoded(document).decode())
)


@SETTINGS
@given(any_input)
def test_any_input_yields_an_event_or_one_of_the_four_typed_errors(raw: object) -> None:
    try:
        event = deserialize_event(raw)  # pyright: ignore[reportArgumentType]
    except TYPED_ERRORS:
        return
    assert type(event) is Event
    encoded = serialize_event(event)
    assert serialize_event(deserialize_event(encoded)) == encoded


@SETTINGS
@given(st.integers(1, 30_000), st.sampled_from(["[", '{"a":', '[{"a":']))
def test_deep_nesting_in_text_is_always_a_parse_error(depth: int, opener: str) -> None:
    raw = (
        '{"v":1,"type":"tool.call","eventId":"e","at":"'
        + examples.AT
        + '","data":{"callId":"c","tool":"t","input":'
    )
    raw += opener * depth
    with pytest.raises(EventParseError):
        deserialize_event(raw)


def test_timestamps_strategy_yields_valid_timestamps() -> None:
    # A guard for the generator itself: its corner (year 1, +23:59) must be accepted.
    event = create_event("session.created", {"sessionId": "s"}, at="0001-01-01T00:00:00.1+23:59")
    assert event.at.startswith("0001")
    assert datetime.now(UTC).year >= 2024
