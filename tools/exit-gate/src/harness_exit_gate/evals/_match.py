"""What a golden scenario's expectations compare (exit-gate.md): events and model requests.

An event invariant names an event's ``type`` and ``data.<path>`` → scalar fields; a request
expectation names the model's N-th request and ``<path>`` → scalar fields of its JSON form
(:func:`request_document`). Both compare by JSON equality on wire keys, and a failure says
which field differed and what was seen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias, cast

import msgspec

from harness_kernel.events import Event, serialize_event

__all__ = [
    "ABSENT",
    "REQUEST_KEYS",
    "EventInvariant",
    "InvariantValue",
    "RequestExpectation",
    "encode_plain",
    "event_document",
    "matches",
    "mismatch",
    "request_document",
    "request_failures",
    "show",
]

InvariantValue: TypeAlias = str | int | float | bool | None
"""A scalar an invariant compares a field with (JSON equality)."""

REQUEST_KEYS: Final = ("messageCount", "messages", "system", "tools", "maxTokens")
"""The top-level keys of a request's JSON form; a request expectation's paths start with one."""


def _plain(value: object) -> object:
    # The kernel's frozen JSON containers are read-only mappings and sequences.
    if isinstance(value, Mapping):
        return dict(cast("Mapping[object, object]", value))
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return list(cast("Sequence[object]", value))
    raise TypeError(f"cannot encode a value of type {type(value).__name__} as JSON")


_ENCODER: Final = msgspec.json.Encoder(enc_hook=_plain)


def encode_plain(value: object) -> bytes:
    """Compact UTF-8 JSON of ``value`` (plain data, msgspec Structs, frozen JSON).

    Raises:
        TypeError: a value of an unsupported type.
        msgspec.EncodeError: msgspec could not encode ``value``.
    """
    return _ENCODER.encode(value)


ABSENT: Final = object()
"""What a path that leads nowhere in a document stands for (shown as ``nothing``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class EventInvariant:
    """An event the stream must contain: its ``type`` and ``data.<path>`` → scalar fields."""

    type: str
    fields: tuple[tuple[str, InvariantValue], ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class RequestExpectation:
    """What the model's ``request``-th request (1-based, summary requests included) holds.

    ``fields`` are ``<path>`` → scalar pairs on the request's JSON form: ``messageCount``,
    ``messages.<i>.role``/``content``/``toolCalls``/``name``/``toolCallId``, ``system``,
    ``tools.<i>.name`` and ``maxTokens``.
    """

    request: int
    fields: tuple[tuple[str, InvariantValue], ...] = ()


def show(value: object) -> str:
    """``value`` as compact JSON, or ``nothing`` for :data:`ABSENT`."""
    return "nothing" if value is ABSENT else encode_plain(value).decode()


def _json_equal(wanted: InvariantValue, seen: object) -> bool:
    if type(wanted) is bool or type(seen) is bool:
        return type(wanted) is type(seen) and wanted == seen
    if type(wanted) in (int, float) and type(seen) in (int, float):
        return wanted == seen
    return type(wanted) is type(seen) and wanted == seen


def _lookup(document: object, dotted: str) -> object:
    current = document
    for part in dotted.split("."):
        if type(current) is dict:
            mapping = cast("dict[str, object]", current)
            if part not in mapping:
                return ABSENT
            current = mapping[part]
        elif type(current) is list and part.isdigit() and int(part) < len(cast("list[object]", current)):
            current = cast("list[object]", current)[int(part)]
        else:
            return ABSENT
    return current


def mismatch(
    document: object, fields: Sequence[tuple[str, InvariantValue]]
) -> tuple[str, object, InvariantValue] | None:
    """The first ``(path, seen, wanted)`` of ``fields`` that ``document`` does not hold, if any."""
    for key, wanted in fields:
        seen = _lookup(document, key)
        if seen is ABSENT or not _json_equal(wanted, seen):
            return key, seen, wanted
    return None


def event_document(event: Event) -> object:
    """``event`` as its wire JSON decodes (camelCase keys)."""
    return msgspec.json.decode(serialize_event(event))


def matches(event: Event, invariant: EventInvariant) -> bool:
    """Whether ``event`` is of the invariant's type and holds every one of its fields."""
    return event.type == invariant.type and mismatch(event_document(event), invariant.fields) is None


def request_document(request: object) -> object:
    """A model request's JSON form: ``messageCount``, ``messages``, ``system``, ``tools``, ``maxTokens``.

    ``request`` is a ``ModelRequest`` or a legacy ``CompletionRequest``; messages and tool
    definitions are encoded as the kernel encodes them (camelCase keys).
    """
    messages = tuple(getattr(request, "messages", ()))
    tools = getattr(request, "tools", None)
    return msgspec.json.decode(
        encode_plain(
            {
                "messageCount": len(messages),
                "messages": messages,
                "system": getattr(request, "system", None),
                "tools": None if tools is None else tuple(tools),
                "maxTokens": getattr(request, "max_tokens", None),
            }
        )
    )


def request_failures(requests: Sequence[object], expectations: Sequence[RequestExpectation]) -> list[str]:
    """``requests.<i> (request N): …`` for each expectation the model's requests do not meet."""
    failures: list[str] = []
    for index, expectation in enumerate(expectations):
        label = f"requests.{index} (request {expectation.request})"
        if expectation.request > len(requests):
            failures.append(f"{label}: the model received {len(requests)} requests")
            continue
        differs = mismatch(request_document(requests[expectation.request - 1]), expectation.fields)
        if differs is not None:
            key, seen, wanted = differs
            failures.append(f"{label}: {key}: wanted {show(wanted)}, saw {show(seen)}")
    return failures
