"""Turning stored rows back into records, re-validating everything (spec §6.3).

A row is never trusted: its payload is decoded through the event gates (so a corrupt payload
raises the typed event error) and its indexed columns must agree with that payload. Rows
are tuples in the column order of the SQLite schema; the in-memory store keeps the same
tuples, so both stores decode — and return — exactly the same records.
"""

from __future__ import annotations

import sqlite3
from typing import Final

import msgspec
from msgspec import UNSET

from harness_kernel._json import FrozenDict, JsonDataError, JsonValue, decode_json, freeze_json
from harness_kernel.events._codec import deserialize_event
from harness_kernel.store._leases import read_lease
from harness_kernel.store._records import (
    SESS_INVALID_RECORD,
    SequencedEvent,
    SessionCheckpoint,
    SessionRecord,
    SessionStoreError,
)

__all__ = [
    "decode_checkpoint",
    "decode_event_row",
    "decode_session_row",
    "stored_json",
]

_STATUSES: Final = ("active", "closed", "archived")


def _invalid(message: str) -> SessionStoreError:
    return SessionStoreError(SESS_INVALID_RECORD, message)


def _optional_str(value: object) -> bool:
    return value is None or type(value) is str


def stored_json(text: object, what: str) -> JsonValue:
    """The frozen JSON value of a stored JSON column, else ``SESS_INVALID_RECORD``."""
    if type(text) is not str:
        raise _invalid(f"stored {what} is not JSON text")
    try:
        return freeze_json(decode_json(text), max_nodes=None)
    except (msgspec.DecodeError, UnicodeError, RecursionError, JsonDataError):
        raise _invalid(f"stored {what} is not valid JSON data") from None


def decode_event_row(row: sqlite3.Row | tuple[object, ...]) -> SequencedEvent:
    """A stored event row, its payload re-decoded and checked against the columns.

    Raises:
        EventParseError, EventVersionError, UnknownEventTypeError, EventSchemaError: the
            payload is not a valid event.
        SessionStoreError: ``SESS_INVALID_RECORD`` — a column disagrees with the payload.
    """
    session_id, seq, global_seq, event_id, at, actor, event_type, payload = tuple(row)
    if type(payload) is not str and type(payload) is not bytes:
        raise _invalid(f'stored event {seq!r} of session "{session_id}" has no JSON payload')
    assert isinstance(payload, str | bytes)
    event = deserialize_event(payload)
    payload_actor = None if event.actor is UNSET else event.actor
    if (
        type(session_id) is not str
        or type(seq) is not int
        or type(global_seq) is not int
        or event_id != event.event_id
        or event_type != event.type
        or at != event.at
        or actor != payload_actor
    ):
        raise _invalid(f'stored event {seq!r} of session "{session_id}" disagrees with its payload')
    return SequencedEvent(session_id=session_id, seq=seq, global_seq=global_seq, event=event)


def decode_session_row(row: sqlite3.Row | tuple[object, ...]) -> SessionRecord:
    """A stored session row as a record (its lease read from the metadata), else ``SESS_INVALID_RECORD``."""
    session_id, task_id, status, created_at, closed_at, metadata, next_seq, revision = tuple(row)
    if (
        type(session_id) is not str
        or not _optional_str(task_id)
        or status not in _STATUSES
        or type(created_at) is not str
        or not _optional_str(closed_at)
        or type(next_seq) is not int
        or type(revision) is not int
    ):
        raise _invalid(f'stored session "{session_id}" is not a valid record')
    frozen = stored_json(metadata, f'metadata of session "{session_id}"')
    if type(frozen) is not FrozenDict:
        raise _invalid(f'stored metadata of session "{session_id}" is not a JSON object')
    assert isinstance(task_id, str | None)
    assert isinstance(closed_at, str | None)
    return SessionRecord(
        session_id=session_id,
        task_id=task_id,
        status=status,
        created_at=created_at,
        closed_at=closed_at,
        metadata=frozen,
        next_seq=next_seq,
        checkpoint_revision=revision,
        lease=read_lease(frozen),
    )


def decode_checkpoint(row: sqlite3.Row | tuple[object, ...]) -> SessionCheckpoint | None:
    """The checkpoint columns of a session row (``None`` before the first save)."""
    session_id, revision, after_seq, payload, updated_at = tuple(row)
    if revision == 0 and payload is None:
        return None
    if (
        type(session_id) is not str
        or type(revision) is not int
        or type(after_seq) is not int
        or type(updated_at) is not str
    ):
        raise _invalid(f'stored checkpoint of session "{session_id}" is not a valid record')
    return SessionCheckpoint(
        session_id=session_id,
        revision=revision,
        after_seq=after_seq,
        payload=stored_json(payload, f'checkpoint of session "{session_id}"'),
        updated_at=updated_at,
    )
