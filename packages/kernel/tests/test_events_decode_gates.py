"""Decoding runs in gates — JSON, version, type, schema — each with its typed error (§2.2)."""

from __future__ import annotations

import math
from typing import Any, cast

import kernel_event_examples as examples
import pytest

from harness_kernel import HarnessError
from harness_kernel._errors import is_harness_error
from harness_kernel.events import Event as EventClass
from harness_kernel.events import (
    EventParseError,
    EventSchemaError,
    EventVersionError,
    UnknownEventTypeError,
    create_event,
    deserialize_event,
)
from harness_kernel.events._errors import (
    EVT_BAD_JSON,
    EVT_BAD_PAYLOAD,
    EVT_UNKNOWN_TYPE,
    EVT_UNSUPPORTED_VERSION,
)
from harness_kernel.events._model import CURRENT_EVENT_VERSION, SUPPORTED_EVENT_VERSIONS


def loose(value: object) -> Any:
    """Hand a deliberately ill-typed value to the API under test."""
    return value


def valid_document() -> dict[str, object]:
    return examples.document("session.created", {"sessionId": "sess-1"})


def test_versions_are_pinned() -> None:
    assert CURRENT_EVENT_VERSION == 1
    assert SUPPORTED_EVENT_VERSIONS == (1,)


# ------------------------------------------------------------------ gate 1
@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{",
        b"not json",
        b"42",
        b"null",
        b"[]",
        b'[{"v":1}]',
        b'"text"',
        "true",
        b"\xff\xfe{}",
        b'{"v":1,"type":"error",}',
        b"NaN",
        b'{"v":1e400}',
        '{"v":1,"type":"error","eventId":"\ud800"}',
    ],
)
def test_non_json_or_non_object_input_is_a_parse_error(raw: bytes | str) -> None:
    with pytest.raises(EventParseError) as caught:
        deserialize_event(raw)
    assert caught.value.code == EVT_BAD_JSON
    assert isinstance(caught.value, HarnessError)
    assert is_harness_error(caught.value)


@pytest.mark.parametrize("raw", [42, None, [], ["{}"], bytearray(b"{}"), 1.5, object()])
def test_input_of_another_python_type_is_a_parse_error(raw: object) -> None:
    with pytest.raises(EventParseError):
        deserialize_event(loose(raw))


class _Dict(dict[str, object]):
    pass


@pytest.mark.parametrize(
    "data",
    [
        {"sessionId": "s", "x": {1, 2}},
        {"sessionId": "s", "x": math.nan},
        {"sessionId": "s", "x": -math.inf},
        {"sessionId": "s", "x": b"bytes"},
        {"sessionId": "s", "x": {1: "non-string key"}},
        {"sessionId": "s", "x": _Dict()},
        {"sessionId": "s", "x": "\udc00"},
        {"sessionId": "s", "x": object()},
    ],
)
def test_a_dict_holding_non_json_values_is_a_parse_error(data: dict[str, object]) -> None:
    with pytest.raises(EventParseError):
        deserialize_event(examples.document("session.created", data))


def test_a_dict_subclass_at_top_level_is_a_parse_error() -> None:
    with pytest.raises(EventParseError):
        deserialize_event(_Dict(valid_document()))


def test_a_cyclic_dict_is_a_parse_error() -> None:
    document = valid_document()
    data = document["data"]
    assert isinstance(data, dict)
    data["self"] = document
    with pytest.raises(EventParseError, match="cycle"):
        deserialize_event(document)


@pytest.mark.parametrize("depth", [129, 2_000, 20_000])
def test_input_nested_too_deep_is_a_parse_error_in_every_form(depth: int) -> None:
    nested: object = {}
    for _ in range(depth):
        nested = [nested]
    document = examples.document("tool.call", {"callId": "c", "tool": "t", "input": nested})
    for raw in (document, examples.compact(document) if depth < 900 else b"{" + b'"a":[' * depth):
        with pytest.raises(EventParseError) as caught:
            deserialize_event(raw)
        assert caught.value.code == EVT_BAD_JSON


def test_deep_but_bounded_nesting_inside_a_json_field_is_a_schema_issue() -> None:
    nested: object = {}
    for _ in range(100):
        nested = [nested]
    raw = examples.compact(examples.document("tool.call", {"callId": "c", "tool": "t", "input": nested}))
    with pytest.raises(EventSchemaError) as caught:
        deserialize_event(raw)
    assert caught.value.issues[0][0] == "data.input"


# ------------------------------------------------------------------ gate 2
@pytest.mark.parametrize(
    ("raw", "version"),
    [
        (b'{"type":"error"}', None),
        (b'{"v":true,"type":"nope"}', True),
        (b'{"v":1.0,"type":"error"}', 1.0),
        (b'{"v":99,"type":"error"}', 99),
        (b'{"v":2,"type":"session.created","eventId":"e","at":"x","data":{}}', 2),
        (b'{"v":0}', 0),
        (b'{"v":"1"}', "1"),
        (b'{"v":null}', None),
        (b'{"v":[1]}', [1]),
        (b'{"v":18446744073709551616}', 2**64),
    ],
)
def test_missing_or_unsupported_version_is_a_version_error_before_the_type(
    raw: bytes, version: object
) -> None:
    with pytest.raises(EventVersionError) as caught:
        deserialize_event(raw)
    error = caught.value
    assert error.code == EVT_UNSUPPORTED_VERSION
    assert error.version == version
    assert type(error.version) is type(version)
    assert isinstance(error.raw, dict)
    assert error.raw.get("v") == version


# ------------------------------------------------------------------ gate 3
@pytest.mark.parametrize("event_type", ["nope", "", "Session.Created", 5, None, ["error"]])
def test_unknown_type_is_reported_with_the_raw_object(event_type: object) -> None:
    document = valid_document()
    document["type"] = event_type
    with pytest.raises(UnknownEventTypeError) as caught:
        deserialize_event(examples.compact(document))
    error = caught.value
    assert error.code == EVT_UNKNOWN_TYPE
    assert error.type == event_type
    assert error.raw == document


def test_missing_type_is_an_unknown_type_error() -> None:
    with pytest.raises(UnknownEventTypeError) as caught:
        deserialize_event({"v": 1})
    assert caught.value.type is None


def test_create_event_with_an_unknown_type_raises_the_same_error() -> None:
    with pytest.raises(UnknownEventTypeError):
        create_event(loose("session.exploded"), {"sessionId": "s"})


# ------------------------------------------------------------------ gate 4
def test_schema_errors_collect_every_issue_in_a_stable_order() -> None:
    raw = (
        b'{"v":1,"type":"model.response","eventId":"","at":"2024-02-30T00:00:00Z","actor":"",'
        b'"data":{"requestId":"r","model":"m","finishReason":"bad","usage":{"promptTokens":-1,'
        b'"completionTokens":true},"x":1},"y":2}'
    )
    with pytest.raises(EventSchemaError) as caught:
        deserialize_event(raw)
    error = caught.value
    assert error.code == EVT_BAD_PAYLOAD
    assert error.type == "model.response"
    assert [path for path, _ in error.issues] == [
        "eventId",
        "at",
        "actor",
        "data.finishReason",
        "data.usage.promptTokens",
        "data.usage.completionTokens",
        "data.usage.totalTokens",
        "data.x",
        "y",
    ]
    assert all(type(message) is str and message for _, message in error.issues)
    assert "data.finishReason" in str(error)


def test_missing_envelope_fields_are_each_reported() -> None:
    with pytest.raises(EventSchemaError) as caught:
        deserialize_event({"v": 1, "type": "error"})
    assert caught.value.issues == (("eventId", "is required"), ("at", "is required"), ("data", "is required"))


@pytest.mark.parametrize("data", [None, [], "x", 1])
def test_data_that_is_not_an_object_is_a_schema_issue(data: object) -> None:
    with pytest.raises(EventSchemaError) as caught:
        deserialize_event(examples.document("message.completed", data))
    assert caught.value.issues[0][0] == "data"


def test_extra_keys_are_rejected_never_stripped() -> None:
    document = valid_document()
    document["extra"] = True
    data = document["data"]
    assert isinstance(data, dict)
    data["alsoExtra"] = 1
    with pytest.raises(EventSchemaError) as caught:
        deserialize_event(document)
    assert [path for path, _ in caught.value.issues] == ["data.alsoExtra", "extra"]


def test_a_future_optional_field_is_rejected_by_this_version() -> None:
    document = examples.document("session.created", {"sessionId": "s", "region": "eu"})
    with pytest.raises(EventSchemaError):
        deserialize_event(document)


def test_a_long_issue_list_is_shortened_in_the_message_but_kept_whole() -> None:
    data = {f"k{index}": index for index in range(30)}
    with pytest.raises(EventSchemaError) as caught:
        deserialize_event(examples.document("session.created", data))
    assert len(caught.value.issues) == 31
    assert "and 21 more" in str(caught.value)


def test_gates_run_in_order() -> None:
    # A version problem wins over an unknown type and a bad payload.
    with pytest.raises(EventVersionError):
        deserialize_event({"v": 2, "type": "nope", "data": None})
    # An unknown type wins over a bad payload.
    with pytest.raises(UnknownEventTypeError):
        deserialize_event({"v": 1, "type": "nope", "data": None})
    # Non-JSON content wins over everything.
    with pytest.raises(EventParseError):
        deserialize_event({"v": 2, "type": "nope", "data": {1, 2}})


def test_a_decoded_dict_input_is_left_untouched_and_not_aliased() -> None:
    document = examples.document("tool.call", {"callId": "c", "tool": "t", "input": {"a": [1, 2]}})
    snapshot = examples.compact(document)
    event = deserialize_event(document)
    assert examples.compact(document) == snapshot
    data = cast("dict[str, object]", document["data"])
    data_input = cast("dict[str, object]", data["input"])
    data_input["a"] = "changed"
    assert getattr(event.data, "input") == {"a": [1, 2]}  # noqa: B009 - the union has no common input


def test_every_error_is_a_harness_error_with_a_code() -> None:
    errors: list[HarnessError] = []
    for raw in (b"[]", b'{"v":9}', b'{"v":1,"type":"x"}', b'{"v":1,"type":"error"}'):
        try:
            deserialize_event(raw)
        except HarnessError as error:
            errors.append(error)
    assert [error.code for error in errors] == [
        EVT_BAD_JSON,
        EVT_UNSUPPORTED_VERSION,
        EVT_UNKNOWN_TYPE,
        EVT_BAD_PAYLOAD,
    ]
    assert [type(error) for error in errors] == [
        EventParseError,
        EventVersionError,
        UnknownEventTypeError,
        EventSchemaError,
    ]


def test_duplicate_keys_keep_the_last_value_like_json_parse() -> None:
    raw = (
        b'{"v":1,"type":"session.created","eventId":"a","eventId":"b",'
        b'"at":"2024-01-01T00:00:00Z","data":{"sessionId":"s"}}'
    )
    assert deserialize_event(raw).event_id == "b"


def test_decoded_events_are_exact_event_instances() -> None:
    assert type(deserialize_event(examples.compact(valid_document()))) is EventClass
