"""Decoding in gates, creation and serialization of events (spec §2.2).

Every road to an ``Event`` runs the same stages: the JSON gate (a parser's output, or a
caller's ``dict`` checked to be one), then ``v``, then ``type``, then the envelope and the
payload that ``type`` selects, collecting every issue. ``create_event`` and
``serialize_event`` build the wire-key structure of what they are given and send it through
those stages too, so nothing unvalidated is ever written.

An event these stages built is deeply immutable (frozen Structs, ``FrozenDict``,
``FrozenList``), so it stays valid for its whole life: the codec remembers it (by identity,
weakly) and ``validate_event`` returns it as it is instead of checking it again. An
``Event`` built any other way is checked in full.
"""

from __future__ import annotations

import uuid
import weakref
from typing import Final, TypeGuard

import msgspec
from msgspec import UNSET

from harness_kernel._ids import now_timestamp
from harness_kernel._json import (
    JsonDataError,
    check_json_document,
    decode_json,
    encode_json,
    is_exact_dict,
    is_json_object,
    json_type_name,
)
from harness_kernel.events._errors import (
    EventParseError,
    EventSchemaError,
    EventVersionError,
    SchemaIssue,
    UnknownEventTypeError,
)
from harness_kernel.events._model import (
    CURRENT_EVENT_VERSION,
    EVENT_TYPES,
    Event,
    EventData,
    EventPayload,
    EventType,
)
from harness_kernel.events._schema import INVALID, envelope_checkers, payload_validator

__all__ = [
    "DOCUMENT_MAX_DEPTH",
    "create_event",
    "deserialize_event",
    "event_to_document",
    "is_event_type",
    "parse_event_document",
    "serialize_event",
    "validate_event",
    "validate_event_document",
]

DOCUMENT_MAX_DEPTH: Final = 128
"""Deepest container nesting of an event document (root object = 0). Valid events need at
most 66 (JSON-valued fields sit at depth 2 and may nest 64 deeper); deeper input is
``EVT_BAD_JSON`` whatever its form, so the decoder never depends on the interpreter stack."""

_ENVELOPE_KEYS: Final = frozenset({"v", "type", "eventId", "at", "actor", "data"})
_EVENT_TYPE_SET: Final[frozenset[str]] = frozenset(EVENT_TYPES)
_PAYLOAD_CLASSES: Final[frozenset[type[EventPayload]]] = frozenset(
    EventPayload.__subclasses__()  # harness-import-boundary: allow IB002 -- the kernel's own Struct base
)
"""The kernel's own payload and record classes (all direct subclasses; later ones are not ours)."""


def is_event_type(value: object) -> TypeGuard[EventType]:
    """Whether ``value`` is exactly a ``str`` naming a known event type."""
    return type(value) is str and value in _EVENT_TYPE_SET


def _is_payload(value: object) -> TypeGuard[EventPayload]:
    return type(value) in _PAYLOAD_CLASSES


_WIRE_KEYS: Final[dict[type[EventPayload], tuple[str, ...]]] = {
    cls: tuple(info.encode_name for info in msgspec.structs.fields(cls)) for cls in _PAYLOAD_CLASSES
}
"""Each payload class's wire keys, in field order (the order of ``msgspec.structs.astuple``)."""


def _payload_to_wire(payload: EventPayload) -> dict[str, object]:
    """The wire-key structure of a payload Struct (nested records too), values as held."""
    wire: dict[str, object] = {}
    for key, value in zip(_WIRE_KEYS[type(payload)], msgspec.structs.astuple(payload), strict=True):
        if value is not UNSET:
            wire[key] = _payload_to_wire(value) if _is_payload(value) else value
    return wire


def event_to_document(event: Event) -> dict[str, object]:
    """The wire-key structure of an event, its JSON values as held (nothing is copied deeply)."""
    document: dict[str, object] = {
        "v": event.v,
        "type": event.type,
        "eventId": event.event_id,
        "at": event.at,
    }
    if event.actor is not UNSET:
        document["actor"] = event.actor
    data: object = event.data
    document["data"] = _payload_to_wire(data) if _is_payload(data) else data
    return document


def parse_event_document(raw: object) -> dict[str, object]:
    """Gate 1: the JSON object of ``raw`` (``bytes``/``str`` JSON text, or a decoded ``dict``).

    Raises:
        EventParseError: not JSON, not an object at the top level, or nested deeper than
            :data:`DOCUMENT_MAX_DEPTH`.
    """
    if type(raw) is bytes or type(raw) is str:
        assert isinstance(raw, bytes | str)
        try:
            value = decode_json(raw)
        except RecursionError:
            raise EventParseError(f"event JSON is nested deeper than {DOCUMENT_MAX_DEPTH} levels") from None
        except (msgspec.DecodeError, UnicodeError) as error:
            raise EventParseError(f"event is not valid JSON: {error}") from error
    elif is_exact_dict(raw):
        value = raw
    else:
        raise EventParseError(f"an event must be JSON bytes, str or a dict, not {type(raw).__name__}")
    if not is_json_object(value):
        raise EventParseError(f"an event must be a JSON object, not {json_type_name(value)}")
    try:
        check_json_document(value, max_depth=DOCUMENT_MAX_DEPTH)
    except JsonDataError as error:
        raise EventParseError(f"event is not JSON data: {error.reason} at {error.location}") from None
    return value


def validate_event_document(document: dict[str, object]) -> Event:
    """Gates 2 to 4 on a document that passed gate 1; returns the validated event.

    Raises:
        EventVersionError: ``v`` is missing or not exactly the integer 1.
        UnknownEventTypeError: ``type`` is not a known event type.
        EventSchemaError: every envelope and payload issue found.
    """
    version = document.get("v")
    if type(version) is not int or version != CURRENT_EVENT_VERSION:
        raise EventVersionError(version, document)
    event_type = document.get("type")
    if not is_event_type(event_type):
        raise UnknownEventTypeError(event_type, document)
    issues: list[SchemaIssue] = []
    envelope: dict[str, object] = {}
    for key, (check, required) in envelope_checkers().items():
        if key in document:
            envelope[key] = check(document[key], key, issues)
        elif required:
            issues.append((key, "is required"))
    if "data" in document:
        data = payload_validator(event_type)(document["data"], "data", issues)
    else:
        data = INVALID
        issues.append(("data", "is required"))
    issues.extend((key, "is not allowed in an event") for key in document if key not in _ENVELOPE_KEYS)
    if issues:
        raise EventSchemaError(event_type, tuple(issues))
    event_id, at = envelope["eventId"], envelope["at"]
    assert isinstance(event_id, str)
    assert isinstance(at, str)
    actor = envelope.get("actor", UNSET)
    assert isinstance(actor, str) or actor is UNSET
    event = Event(v=1, type=event_type, event_id=event_id, at=at, actor=actor, data=data)  # pyright: ignore[reportArgumentType]
    return _remember(event)


_KNOWN_VALID: Final[weakref.WeakValueDictionary[int, Event]] = weakref.WeakValueDictionary()
"""Events the gates built, by ``id``; an entry leaves with its event."""


def _remember(event: Event) -> Event:
    _KNOWN_VALID[id(event)] = event
    return event


def _is_known_valid(event: Event) -> bool:
    return _KNOWN_VALID.get(id(event)) is event


def _validated(document: dict[str, object]) -> Event:
    return validate_event_document(parse_event_document(document))


def create_event(
    type: EventType,
    data: EventData | dict[str, object],
    *,
    event_id: str | None = None,
    at: str | None = None,
    actor: str | None = None,
) -> Event:
    """Build a validated event, exactly as decoding its wire form would.

    Args:
        type: The event type; it selects the payload schema.
        data: The payload Struct, or a ``dict`` with wire (camelCase) keys.
        event_id: Defaults to a fresh uuid4 text.
        at: Defaults to now in UTC with milliseconds and ``Z``.
        actor: Omitted unless given.

    Raises:
        EventParseError: ``data`` (or an argument) holds a non-JSON value.
        UnknownEventTypeError: ``type`` is not a known event type.
        EventSchemaError: every envelope and payload issue found.
    """
    document: dict[str, object] = {
        "v": CURRENT_EVENT_VERSION,
        "type": type,
        "eventId": str(uuid.uuid4()) if event_id is None else event_id,
        "at": now_timestamp() if at is None else at,
    }
    if actor is not None:
        document["actor"] = actor
    document["data"] = _payload_to_wire(data) if _is_payload(data) else data
    return _validated(document)


def _require_event(event: object, operation: str) -> Event:
    if type(event) is not Event:
        raise TypeError(f"{operation} expects an Event, not {type(event).__name__}")
    assert isinstance(event, Event)
    return event


def validate_event(event: Event) -> Event:
    """Re-validate an ``Event`` instance (``__init__`` does not validate); returns a clean copy.

    An event the codec built (``create_event``, ``deserialize_event``, this function) is
    deeply immutable and was valid when built; it is returned as it is.

    Raises:
        TypeError: ``event`` is not exactly an ``Event``.
        EventParseError, EventVersionError, UnknownEventTypeError, EventSchemaError: as
            decoding its wire form would.
    """
    checked = _require_event(event, "validate_event")
    if _is_known_valid(checked):
        return checked
    return _validated(event_to_document(checked))


def serialize_event(event: Event) -> bytes:
    """Compact UTF-8 JSON of a (re-validated) event; ``.decode()`` gives the text.

    Raises:
        TypeError: ``event`` is not exactly an ``Event``.
        EventParseError, EventVersionError, UnknownEventTypeError, EventSchemaError: the
            event is not valid (it was built by hand), so nothing is written.
    """
    return encode_json(validate_event(_require_event(event, "serialize_event")))


def deserialize_event(raw: bytes | str | dict[str, object]) -> Event:
    """Decode and validate one event, in the gate order of the spec.

    Raises:
        EventParseError: ``EVT_BAD_JSON`` — not JSON, not an object, or nested too deep.
        EventVersionError: ``EVT_UNSUPPORTED_VERSION`` — ``v`` missing or not exactly 1.
        UnknownEventTypeError: ``EVT_UNKNOWN_TYPE`` — ``type`` is not a known event type.
        EventSchemaError: ``EVT_BAD_PAYLOAD`` — every other problem, all of them listed.
    """
    return validate_event_document(parse_event_document(raw))
