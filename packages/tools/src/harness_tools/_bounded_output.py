"""Head-and-tail bounding of tool output to a JSON byte budget (issue #18).

A development tool's result must encode to at most a fixed number of JSON bytes. When a
command's output, a diff or a listing is longer, the tool keeps a head and a tail and says
how much it left out, instead of cutting the end off (a model needs the end of a failing
test run) or refusing outright.

Sizes are those of msgspec's compact JSON encoder, the one that puts the result on the
wire: a string costs its UTF-8 bytes, two quotes, one extra byte for each of ``"``, ``\\``
and the control characters with a short escape (``\\b \\t \\n \\f \\r``) and five extra
bytes for each other control character (``\\u00XX``). msgspec refuses a string holding a
lone surrogate; so does this module, with :class:`OutputNotUtf8Error`, wherever in the
input the surrogate is (the outcome never depends on the budget).

This module is pure: no I/O, no state. The development tools import it; it is not part
of the package's public surface.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Final

import msgspec

from harness_tools._errors import ToolError

__all__ = [
    "BOUND_TEXT_MIN_JSON_BYTES",
    "DEFAULT_ITEMS_HEAD_SHARE",
    "DEFAULT_LINE_SNAP_CHARS",
    "DEFAULT_TEXT_HEAD_SHARE",
    "TOOL_OUTPUT_BUDGET_INVALID",
    "TOOL_OUTPUT_NOT_UTF8",
    "BoundedItems",
    "BoundedText",
    "OutputBudgetError",
    "OutputNotUtf8Error",
    "bound_items",
    "bound_text",
    "dropped_bytes_marker",
    "json_string_size",
]

TOOL_OUTPUT_BUDGET_INVALID: Final = "TOOL_OUTPUT_BUDGET_INVALID"
TOOL_OUTPUT_NOT_UTF8: Final = "TOOL_OUTPUT_NOT_UTF8"

DEFAULT_TEXT_HEAD_SHARE: Final = 0.2
"""A fifth of a text's room goes to its head, the rest to its tail, where a failure shows."""
DEFAULT_ITEMS_HEAD_SHARE: Final = 0.5
"""A listing has no end that matters more than its start: half and half."""
DEFAULT_LINE_SNAP_CHARS: Final = 256
"""How many characters a cut may give up to land on a line boundary."""

# Python cannot hold a string of 10**20 UTF-8 bytes, so no count in a marker is longer.
_MAX_COUNT_DIGITS: Final = 20
# Sizing encodes slices of this many characters: the temporary buffer stays small (a
# string of control characters encodes to six times its length) and, measured, slices
# are as fast as one whole-string encode (benchmarks/bounded_output.py).
_SIZING_CHUNK_CHARS: Final = 1 << 16
_SIZING_CHUNK_ITEMS: Final = 1 << 12
_LOWER_U: Final = 0x75
_SHORT_ESCAPE_BYTES: Final = 2
_UNICODE_ESCAPE_BYTES: Final = 6

_encode = msgspec.json.encode
_decode_str = msgspec.json.Decoder(str).decode


class OutputBudgetError(ToolError, ValueError):
    """A byte budget or a head share that no bounded output can satisfy (a caller's bug).

    It is also a ``ValueError``: the budget is a value of the right type but out of range.
    """

    def __init__(self, message: str) -> None:
        super().__init__(TOOL_OUTPUT_BUDGET_INVALID, message)


class OutputNotUtf8Error(ToolError, ValueError):
    """Output holds a lone surrogate, which neither UTF-8 nor msgspec's JSON can carry.

    Attributes:
        position: The index of the first such character in the string (in the item, for
            a listing).
        item_index: For a listing, the index of the item that holds it; else ``None``.
    """

    position: int
    item_index: int | None

    def __init__(self, message: str, position: int, *, item_index: int | None = None) -> None:
        super().__init__(TOOL_OUTPUT_NOT_UTF8, message)
        self.position = position
        self.item_index = item_index

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_not_utf8, (self.message, self.position, self.item_index), self._pickled_state())


def _rebuild_not_utf8(message: str, position: int, item_index: int | None) -> OutputNotUtf8Error:
    return OutputNotUtf8Error(message, position, item_index=item_index)


class BoundedText(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A text cut to fit a JSON byte budget, and what the cut left out.

    Attributes:
        text: The original when it fits; otherwise a prefix of it, the marker of
            :func:`dropped_bytes_marker` and a suffix of it.
        truncated: Whether anything was left out (exactly when the marker was inserted).
        dropped_bytes: UTF-8 bytes of the original left out (0 when not truncated).
        original_bytes: UTF-8 bytes of the original.
        json_bytes: The exact size of ``msgspec.json.encode(text)``, so that a caller
            sharing one budget between several fields can hand the rest on.
    """

    text: str
    truncated: bool
    dropped_bytes: int
    original_bytes: int
    json_bytes: int


class BoundedItems(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A listing cut to fit a JSON byte budget as an array, and how many items it lost.

    Attributes:
        items: The original items when they fit; otherwise the first ``head_count`` items
            followed by the last ``len(items) - head_count`` ones. No marker item is
            inserted (it would read as one more name).
        truncated: Whether any item was left out.
        dropped_items: How many items were left out, between the head and the tail.
        head_count: How many of ``items`` come before the gap.
        json_bytes: The exact size of ``msgspec.json.encode(list(items))``.
    """

    items: tuple[str, ...]
    truncated: bool
    dropped_items: int
    head_count: int
    json_bytes: int


def dropped_bytes_marker(dropped_bytes: int) -> str:
    """The line that stands where ``dropped_bytes`` bytes were left out of a text.

    It starts and ends with a newline so that it sits on a line of its own whatever the
    cut; ``bound_text`` cuts next to a newline when one is near, and that newline is
    among the dropped bytes, so a kept line is never followed by an empty one.
    """
    return f"\n[… {dropped_bytes} bytes dropped …]\n"


BOUND_TEXT_MIN_JSON_BYTES: Final = len(_encode(dropped_bytes_marker(10**_MAX_COUNT_DIGITS - 1)))
"""The smallest budget :func:`bound_text` accepts: room for the longest marker (50 bytes)."""


def _sum_over_chunks(text: str, measure: Callable[[str], int]) -> int:
    """Add ``measure`` over slices of ``text``, naming the first lone surrogate if any."""
    if len(text) <= _SIZING_CHUNK_CHARS:
        chunks = (text,)
    else:
        chunks = (text[i : i + _SIZING_CHUNK_CHARS] for i in range(0, len(text), _SIZING_CHUNK_CHARS))
    total = 0
    offset = 0
    for chunk in chunks:
        try:
            total += measure(chunk)
        except UnicodeEncodeError as error:
            position = offset + error.start
            raise OutputNotUtf8Error(
                f"output holds a lone surrogate at index {position}, which JSON cannot carry", position
            ) from error
        offset += len(chunk)
    return total


def _json_body_size(text: str) -> int:
    # Escaping is per character, so the body (the encoding without its quotes) of a
    # concatenation is the sum of the bodies: slices can be sized one at a time.
    return _sum_over_chunks(text, lambda chunk: len(_encode(chunk)) - 2)


def _utf8_size(text: str) -> int:
    if text.isascii():  # O(1) in CPython: one byte per character
        return len(text)
    return _sum_over_chunks(text, lambda chunk: len(chunk.encode("utf-8")))


def json_string_size(text: str) -> int:
    """The exact length of ``msgspec.json.encode(text)``, quotes included.

    There is no exact shortcut for a non-empty string: whether ASCII text needs escapes
    takes a scan, and msgspec's own escaping scan is faster than any other available from
    Python (a regular expression, ``str.count``, ``bytes.translate``: measured in
    benchmarks/bounded_output.py). So the string is encoded, in slices of 64 Ki
    characters to keep the temporary buffer small, and only the lengths are kept.

    Args:
        text: Any string.

    Raises:
        TypeError: ``text`` is not a ``str``.
        OutputNotUtf8Error: ``text`` holds a lone surrogate (msgspec raises
            ``UnicodeEncodeError`` for it).
    """
    if type(text) is not str:
        raise TypeError(f"json_string_size takes a str, not {type(text).__name__}")
    return _json_body_size(text) + 2


def _check_budget(max_json_bytes: int, minimum: int, head_share: float) -> None:
    if type(max_json_bytes) is not int:
        raise OutputBudgetError(f"max_json_bytes must be an int, not {type(max_json_bytes).__name__}")
    if max_json_bytes < minimum:
        raise OutputBudgetError(f"max_json_bytes must be at least {minimum}, got {max_json_bytes}")
    if type(head_share) not in (float, int) or not 0.0 <= head_share <= 1.0:  # NaN fails too
        raise OutputBudgetError(f"head_share must be a number from 0 to 1, got {head_share!r}")


def _escape_start(encoded: bytes, backslash: int) -> bool:
    """Whether the backslash at ``backslash`` opens an escape (else it closes ``\\\\``)."""
    # The first backslash of a run opens an escape (the byte before it cannot be inside
    # one); within the run, ``\\`` pairs alternate, so openers sit at even distances.
    run_start = len(encoded[: backslash + 1].rstrip(b"\\"))
    return (backslash - run_start) % 2 == 0


def _unit_around(encoded: bytes, position: int) -> tuple[int, int]:
    """The encoded character that a cut before byte ``position`` would split.

    ``encoded`` is msgspec's encoding of a string. Returns the start and end of the one
    character (a UTF-8 sequence or an escape) that straddles ``position``, or
    ``(position, position)`` when the cut falls between two characters.
    """
    end = position
    while end < len(encoded) and 0x80 <= encoded[end] < 0xC0:  # UTF-8 continuation byte
        end += 1
    if end != position:
        start = position - 1
        while 0x80 <= encoded[start] < 0xC0:
            start -= 1
        return start, end
    # Escapes are pure ASCII, at most six bytes, and begin with a backslash: only the
    # last backslash in the five bytes before the cut can open one that straddles it.
    backslash = encoded.rfind(b"\\", max(position - _UNICODE_ESCAPE_BYTES + 1, 0), position)
    if backslash < 0 or not _escape_start(encoded, backslash):
        # No backslash, or the closing half of ``\\`` (which ends by ``position``).
        return position, position
    is_unicode = encoded[backslash + 1] == _LOWER_U
    escape_end = backslash + (_UNICODE_ESCAPE_BYTES if is_unicode else _SHORT_ESCAPE_BYTES)
    if escape_end > position:
        return backslash, escape_end
    return position, position


def _fit_head(text: str, limit: int) -> tuple[int, int]:
    """The longest prefix of ``text`` whose JSON body fits ``limit`` bytes: (chars, bytes)."""
    window = text[:limit]  # every character costs at least one byte
    encoded = _encode(window)
    if len(encoded) - 2 <= limit:
        return len(window), len(encoded) - 2
    start, _ = _unit_around(encoded, 1 + limit)
    return len(_decode_str(encoded[:start] + b'"')), start - 1


def _fit_tail(text: str, limit: int, begin: int) -> tuple[int, int]:
    """The longest suffix of ``text[begin:]`` whose JSON body fits ``limit``: (chars, bytes)."""
    if limit == 0:  # text[-0:] would be all of it
        return 0, 0
    window = text[max(begin, len(text) - limit) :]
    encoded = _encode(window)
    if len(encoded) - 2 <= limit:
        return len(window), len(encoded) - 2
    _, end = _unit_around(encoded, len(encoded) - 1 - limit)
    return len(_decode_str(b'"' + encoded[end:])), len(encoded) - 1 - end


def bound_text(
    text: str,
    max_json_bytes: int,
    *,
    head_share: float = DEFAULT_TEXT_HEAD_SHARE,
    line_snap_chars: int = DEFAULT_LINE_SNAP_CHARS,
) -> BoundedText:
    """Fit ``text`` into ``max_json_bytes`` bytes of JSON, keeping its head and its tail.

    A text whose encoding fits is returned unchanged. Otherwise the result is a prefix of
    ``text``, the marker line of :func:`dropped_bytes_marker` and a suffix of ``text``,
    and it encodes to at most ``max_json_bytes`` bytes, the marker included. The room
    left once the quotes and the marker are paid for goes ``head_share`` to the head and
    the rest, with whatever the head could not use, to the tail. Each cut then moves back
    (the head's) or forward (the tail's) by up to ``line_snap_chars`` characters, and at
    most a quarter of the part it shortens, to sit next to a newline; the newline itself
    is dropped, as the marker brings its own. The result depends on nothing but the
    arguments.

    Only the two ends are encoded (at most ``max_json_bytes`` characters each): apart from
    counting the UTF-8 bytes of a non-ASCII text, the work does not grow with its length.

    Args:
        text: The output to bound.
        max_json_bytes: The most bytes ``msgspec.json.encode(result.text)`` may take; at
            least :data:`BOUND_TEXT_MIN_JSON_BYTES` (50), whatever the text.
        head_share: The head's part of the room, from 0 (tail only) to 1 (head only).
        line_snap_chars: How far a cut may move to reach a line boundary; 0 turns it off.

    Raises:
        TypeError: ``text`` is not a ``str``.
        OutputBudgetError: ``max_json_bytes`` is below the minimum or not an ``int``,
            ``head_share`` is outside [0, 1], or ``line_snap_chars`` is negative.
        OutputNotUtf8Error: ``text`` holds a lone surrogate (anywhere, kept or not).
    """
    if type(text) is not str:
        raise TypeError(f"bound_text takes a str, not {type(text).__name__}")
    _check_budget(max_json_bytes, BOUND_TEXT_MIN_JSON_BYTES, head_share)
    if type(line_snap_chars) is not int or line_snap_chars < 0:
        raise OutputBudgetError(f"line_snap_chars must be an int of at least 0, got {line_snap_chars!r}")
    original_bytes = _utf8_size(text)  # also refuses a lone surrogate anywhere in the text
    # Each character costs at least one byte, so a long text is over without being encoded.
    if len(text) + 2 <= max_json_bytes:
        body = _json_body_size(text)
        if body + 2 <= max_json_bytes:
            return BoundedText(
                text=text,
                truncated=False,
                dropped_bytes=0,
                original_bytes=original_bytes,
                json_bytes=2 + body,
            )
    # The count in the marker is at most original_bytes, so its marker is the longest.
    room = max_json_bytes - 2 - _json_body_size(dropped_bytes_marker(original_bytes))
    head_chars, head_body = _fit_head(text, int(room * head_share))
    snapped = _snap_head(text, head_chars, line_snap_chars)
    head_body -= _json_body_size(text[snapped:head_chars])
    head_chars = snapped
    # The whole text does not fit, so the tail never reaches back into the head.
    tail_chars, tail_body = _fit_tail(text, room - head_body, head_chars)
    tail_start = _snap_tail(text, len(text) - tail_chars, head_chars, line_snap_chars)
    tail_body -= _json_body_size(text[len(text) - tail_chars : tail_start])
    head, tail = text[:head_chars], text[tail_start:]
    dropped_bytes = original_bytes - _utf8_size(head) - _utf8_size(tail)
    marker = dropped_bytes_marker(dropped_bytes)
    return BoundedText(
        text=f"{head}{marker}{tail}",
        truncated=True,
        dropped_bytes=dropped_bytes,
        original_bytes=original_bytes,
        json_bytes=head_body + _json_body_size(marker) + tail_body + 2,
    )


def _snap_head(text: str, head_chars: int, line_snap_chars: int) -> int:
    """Where the head ends once moved back to just before a near newline (kept if none)."""
    reach = min(line_snap_chars, head_chars // 4)
    # text[head_chars] is the first dropped character: a newline there is already a boundary.
    newline = text.rfind("\n", head_chars - reach, head_chars + 1)
    return head_chars if newline < 0 else newline


def _snap_tail(text: str, tail_start: int, head_chars: int, line_snap_chars: int) -> int:
    """Where the tail starts once moved forward to just after a near newline."""
    reach = min(line_snap_chars, (len(text) - tail_start) // 4)
    # At least one character lies between head and tail (the whole text did not fit), so
    # text[tail_start - 1] is dropped: a newline there is already a boundary.
    newline = text.find("\n", max(tail_start - 1, head_chars), tail_start + reach)
    return tail_start if newline < 0 else newline + 1


def _items_json_size(items: Sequence[str]) -> int:
    """``len(msgspec.json.encode(list(items)))``, encoded a slice of items at a time."""
    total = 2 + max(len(items) - 1, 0)  # brackets and commas
    for first in range(0, len(items), _SIZING_CHUNK_ITEMS):
        chunk = items[first : first + _SIZING_CHUNK_ITEMS]
        try:
            total += len(_encode(chunk)) - 2 - (len(chunk) - 1)
        except UnicodeEncodeError as error:
            raise _surrogate_in_listing(chunk, first) from error
    return total


def _surrogate_in_listing(chunk: Sequence[str], first: int) -> OutputNotUtf8Error:
    # Only on failure: find which item msgspec stumbled on, for the message.
    for index, item in enumerate(chunk, start=first):
        try:
            item.encode("utf-8")
        except UnicodeEncodeError as error:
            return OutputNotUtf8Error(
                f"listing item {index} holds a lone surrogate at index {error.start}, "
                "which JSON cannot carry",
                error.start,
                item_index=index,
            )
    return OutputNotUtf8Error("a listing item holds a lone surrogate, which JSON cannot carry", 0)


def bound_items(
    items: Sequence[str], max_json_bytes: int, *, head_share: float = DEFAULT_ITEMS_HEAD_SHARE
) -> BoundedItems:
    """Fit a listing into ``max_json_bytes`` bytes as a compact JSON array of its items.

    A listing whose array fits is returned unchanged (as a tuple). Otherwise whole items
    are kept from the start and from the end: ``head_share`` of the room after the
    brackets goes to the head, the rest, with whatever the head could not use, to the
    tail. Each end stops at the first item that does not fit, so the head is a prefix and
    the tail a suffix of ``items``. Nothing is inserted between them; the caller reports
    ``dropped_items`` in a field of its own.

    Args:
        items: The names, in the order the caller wants kept.
        max_json_bytes: The most bytes ``msgspec.json.encode(list(result.items))`` may
            take; at least 2 (the empty array).
        head_share: The head's part of the room, from 0 (tail only) to 1 (head only).

    Raises:
        OutputBudgetError: ``max_json_bytes`` is below 2 or not an ``int``, or
            ``head_share`` is outside [0, 1].
        OutputNotUtf8Error: an item holds a lone surrogate (anywhere, kept or not).
    """
    _check_budget(max_json_bytes, 2, head_share)
    listing = items if type(items) in (list, tuple) else list(items)
    total = _items_json_size(listing)  # also refuses a lone surrogate in any item
    if total <= max_json_bytes:
        return BoundedItems(
            items=tuple(listing), truncated=False, dropped_items=0, head_count=len(listing), json_bytes=total
        )
    # An item costs its encoding plus one comma; the last one kept has no comma, hence + 1.
    room = max_json_bytes - 2 + 1
    head_count, head_cost = _take_items(listing, int(room * head_share))
    # The whole listing does not fit, so the tail never reaches back into the head.
    tail_count, tail_cost = _take_items(reversed(listing), room - head_cost)
    kept = (*listing[:head_count], *listing[len(listing) - tail_count :])
    return BoundedItems(
        items=kept,
        truncated=True,
        dropped_items=len(listing) - len(kept),
        head_count=head_count,
        json_bytes=head_cost + tail_cost - 1 + 2 if kept else 2,
    )


def _take_items(items: Iterable[str], limit: int) -> tuple[int, int]:
    """How many of ``items``, in order, fit ``limit`` at one comma each: (count, cost)."""
    cost = 0
    count = 0
    for item in items:
        item_cost = len(_encode(item)) + 1
        if cost + item_cost > limit:
            break
        cost += item_cost
        count += 1
    return count, cost
