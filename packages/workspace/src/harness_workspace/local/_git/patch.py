"""The unified patch text of one file, in the form ``git diff`` prints and ``git apply`` reads.

Per file: ``diff --git a/<path> b/<path>``; ``new file mode``, ``deleted file mode`` or
``old mode``/``new mode``; ``index <old>..<new>[ <mode>]`` with git's abbreviations (at least 7
digits, more in a large repository or where a prefix is ambiguous; zeros for a side that
does not exist); then ``Binary files … differ`` when either side
has a NUL in its first 8 000 bytes (git's rule), or ``---``/``+++`` and the hunks: three lines
of context, changes closer than seven lines joined, ``@@ -a,b +c,d @@`` followed by the
nearest earlier line that starts with a letter, ``_`` or ``$`` (git's default function
context), and ``\\ No newline at end of file`` after a last line without one. Paths are
quoted as git quotes them by default (``core.quotePath``): a name with a control character,
``"``, ``\\`` or a byte above 0x7e is written in double quotes with C escapes and octal bytes.

The line diff is Myers' greedy algorithm on the lines left once the common head and tail
are set aside and lines found on one side only are marked changed (as git's xdiff does).
It gives a minimal patch, but not always git's: git also slides changes to the most
readable position (its indent heuristic), which this does not. Its work is bounded: past
``max_diff_cost`` steps the changed middle of the file is shown as removed and added in
full, which is still a correct patch.
"""

from __future__ import annotations

from array import array
from typing import Final, NamedTuple

from harness_workspace.local._git.bounds import Budget

__all__ = ["WITHHELD_LINE", "Side", "file_patch", "line_changes", "withheld_patch"]

_CONTEXT: Final = 3
_BINARY_PROBE: Final = 8000
_FUNCTION_BYTES: Final = 80
_NO_NEWLINE: Final = b"\n\\ No newline at end of file\n"
_QUOTE_ESCAPES: Final = {
    7: b"a",
    8: b"b",
    9: b"t",
    10: b"n",
    11: b"v",
    12: b"f",
    13: b"r",
    34: b'"',
    92: b"\\",
}
_TYPE_MASK: Final = 0o170000
WITHHELD_LINE: Final = b"Content withheld: the path is on the credential deny list\n"
"""What a withheld file's section shows instead of its hunks (no hunk, no object id)."""


class Side(NamedTuple):
    """One side of a file's change: its mode, object id, the id as the patch shows it, and bytes."""

    mode: int
    object_id: bytes
    abbreviation: str
    content: bytes


def file_patch(path: bytes, old: Side | None, new: Side | None, null: str, budget: Budget) -> bytes:
    """Return the patch of one path; a change of type is a deletion followed by a creation.

    ``null`` is the abbreviation shown for a side that does not exist (zeros).
    """
    if old is not None and new is not None and (old.mode & _TYPE_MASK) != (new.mode & _TYPE_MASK):
        return _one_patch(path, old, None, null, budget) + _one_patch(path, None, new, null, budget)
    return _one_patch(path, old, new, null, budget)


def withheld_patch(path: bytes, old_mode: int | None, new_mode: int | None) -> bytes:
    """The section of a changed credential file: its name, its modes, and :data:`WITHHELD_LINE`.

    No ``index`` line: an object id is a hash of the content, and a short secret could be
    found again from it.
    """
    return _header(_quote_two(b"a/", path), _quote_two(b"b/", path), old_mode, new_mode) + WITHHELD_LINE


def _header(a_name: bytes, b_name: bytes, old_mode: int | None, new_mode: int | None) -> bytes:
    """The ``diff --git`` line and the mode lines of a file's section (``None``: that side is absent)."""
    out = [b"diff --git %s %s\n" % (a_name, b_name)]
    if old_mode is None:
        out.append(b"new file mode %o\n" % (new_mode or 0))
    elif new_mode is None:
        out.append(b"deleted file mode %o\n" % old_mode)
    elif old_mode != new_mode:
        out.append(b"old mode %o\nnew mode %o\n" % (old_mode, new_mode))
    return b"".join(out)


def _one_patch(path: bytes, old: Side | None, new: Side | None, null_text: str, budget: Budget) -> bytes:
    a_name, b_name = _quote_two(b"a/", path), _quote_two(b"b/", path)
    out = [_header(a_name, b_name, None if old is None else old.mode, None if new is None else new.mode)]
    null = null_text.encode("ascii")
    if old is None:
        assert new is not None
        out.append(b"index %s..%s\n" % (null, _abbreviate(new)))
    elif new is None:
        out.append(b"index %s..%s\n" % (_abbreviate(old), null))
    else:
        if old.object_id == new.object_id:
            return b"".join(out)
        mode = b" %o" % new.mode if old.mode == new.mode else b""
        out.append(b"index %s..%s%s\n" % (_abbreviate(old), _abbreviate(new), mode))
    before = old.content if old is not None else b""
    after = new.content if new is not None else b""
    a_label = a_name if old is not None else b"/dev/null"
    b_label = b_name if new is not None else b"/dev/null"
    if b"\0" in before[:_BINARY_PROBE] or b"\0" in after[:_BINARY_PROBE]:
        out.append(b"Binary files %s and %s differ\n" % (a_label, b_label))
        return b"".join(out)
    hunks = _hunks(before, after, budget)
    if hunks:
        out.append(b"--- %s%s\n+++ %s%s\n" % (a_label, _tab(a_label), b_label, _tab(b_label)))
        out.append(hunks)
    return b"".join(out)


def _abbreviate(side: Side) -> bytes:
    return side.abbreviation.encode("ascii")


def _tab(label: bytes) -> bytes:
    # git ends a "---"/"+++" name holding a space with a tab, so patch(1) reads it whole.
    return b"\t" if b" " in label else b""


def _quote_two(prefix: bytes, path: bytes) -> bytes:
    if not any(byte < 0x20 or byte >= 0x7F or byte in (34, 92) for byte in path):
        return prefix + path
    body = bytearray(b'"' + prefix)
    for byte in path:
        escape = _QUOTE_ESCAPES.get(byte)
        if escape is not None:
            body += b"\\" + escape
        elif byte < 0x20 or byte >= 0x7F:
            body += b"\\%03o" % byte
        else:
            body.append(byte)
    body += b'"'
    return bytes(body)


def _split_lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    last = lines.pop()
    result = [line + b"\n" for line in lines]
    if last:
        result.append(last)
    return result


def _hunks(before: bytes, after: bytes, budget: Budget) -> bytes:
    a, b = _split_lines(before), _split_lines(after)
    changed_a, changed_b = line_changes(a, b, budget)
    blocks: list[tuple[int, int, int, int]] = []
    i = j = 0
    while i < len(a) or j < len(b):
        if i < len(a) and j < len(b) and not changed_a[i] and not changed_b[j]:
            i += 1
            j += 1
            continue
        start_i, start_j = i, j
        while i < len(a) and changed_a[i]:
            i += 1
        while j < len(b) and changed_b[j]:
            j += 1
        blocks.append((start_i, i, start_j, j))
    out: list[bytes] = []
    function = _FunctionContext(a)
    first = 0
    while first < len(blocks):
        last = first
        while last + 1 < len(blocks) and blocks[last + 1][0] - blocks[last][1] <= 2 * _CONTEXT:
            last += 1
        out.append(_hunk(a, b, blocks[first : last + 1], function))
        first = last + 1
    return b"".join(out)


def _hunk(
    a: list[bytes], b: list[bytes], blocks: list[tuple[int, int, int, int]], function: _FunctionContext
) -> bytes:
    start_a = max(0, blocks[0][0] - _CONTEXT)
    start_b = blocks[0][2] - (blocks[0][0] - start_a)
    end_a = min(len(a), blocks[-1][1] + _CONTEXT)
    end_b = blocks[-1][3] + (end_a - blocks[-1][1])
    name = function.before(start_a)
    out = [b"@@ -%s +%s @@%s\n" % (_range(start_a, end_a - start_a), _range(start_b, end_b - start_b), name)]
    position = start_a
    for i1, i2, j1, j2 in blocks:
        out.extend(_line(b" ", line) for line in a[position:i1])
        out.extend(_line(b"-", line) for line in a[i1:i2])
        out.extend(_line(b"+", line) for line in b[j1:j2])
        position = i2
    out.extend(_line(b" ", line) for line in a[position:end_a])
    return b"".join(out)


def _range(start: int, count: int) -> bytes:
    if count == 1:
        return b"%d" % (start + 1)
    return b"%d,%d" % (start + 1 if count else start, count)


def _line(prefix: bytes, line: bytes) -> bytes:
    return prefix + line if line.endswith(b"\n") else prefix + line + _NO_NEWLINE


class _FunctionContext:
    """Finds the function line git prints after a hunk header, searching each line once."""

    __slots__ = ("_found", "_lines", "_searched_to")

    def __init__(self, lines: list[bytes]) -> None:
        self._lines = lines
        self._searched_to = -1
        self._found = b""

    def before(self, start: int) -> bytes:
        """The nearest line above index ``start`` that starts with a letter, ``_`` or ``$``."""
        for index in range(start - 1, self._searched_to, -1):
            line = self._lines[index]
            first = line[:1]
            if first.isalpha() or first in (b"_", b"$"):
                self._found = b" " + line[:_FUNCTION_BYTES].rstrip(b" \t\n\r")
                break
        self._searched_to = start - 1
        return self._found


def line_changes(a: list[bytes], b: list[bytes], budget: Budget) -> tuple[bytearray, bytearray]:
    """Mark which lines of ``a`` were removed and which of ``b`` were added.

    The unmarked lines of both, in order, are the same sequence, so the marks always make
    a correct patch.
    """
    changed_a, changed_b = bytearray(len(a)), bytearray(len(b))
    head = 0
    while head < len(a) and head < len(b) and a[head] == b[head]:
        head += 1
    end_a, end_b = len(a), len(b)
    while end_a > head and end_b > head and a[end_a - 1] == b[end_b - 1]:
        end_a -= 1
        end_b -= 1
    numbers: dict[bytes, int] = {}
    middle_a = [numbers.setdefault(line, len(numbers)) for line in a[head:end_a]]
    middle_b = [numbers.setdefault(line, len(numbers)) for line in b[head:end_b]]
    in_a, in_b = set(middle_a), set(middle_b)
    # A line found on one side only is changed whatever the alignment: leave it out of Myers.
    kept_a = [index for index, number in enumerate(middle_a) if number in in_b]
    kept_b = [index for index, number in enumerate(middle_b) if number in in_a]
    for index in range(len(middle_a)):
        changed_a[head + index] = 1
    for index in range(len(middle_b)):
        changed_b[head + index] = 1
    pairs = _myers([middle_a[i] for i in kept_a], [middle_b[j] for j in kept_b], budget)
    for i, j in pairs:
        changed_a[head + kept_a[i]] = 0
        changed_b[head + kept_b[j]] = 0
    return changed_a, changed_b


def _myers(a: list[int], b: list[int], budget: Budget) -> list[tuple[int, int]]:
    """Return the aligned pairs of a shortest edit script, or none past the cost bound."""
    n, m = len(a), len(b)
    if not n or not m:
        return []
    offset = n + m + 1
    frontier = array("i", bytes(4 * (2 * offset + 2)))
    trace: list[array[int]] = []
    cost = 0
    limit = budget.limits.max_diff_cost
    for d in range(n + m + 1):
        budget.check()
        for k in range(-d, d + 1, 2):
            if k == -d or (k != d and frontier[offset + k - 1] < frontier[offset + k + 1]):
                x = frontier[offset + k + 1]
            else:
                x = frontier[offset + k - 1] + 1
            y = x - k
            start = x
            while x < n and y < m and a[x] == b[y]:
                x += 1
                y += 1
            cost += x - start + 1
            frontier[offset + k] = x
            if x >= n and y >= m:
                trace.append(frontier[offset - d : offset + d + 1])
                return _backtrack(trace, n, m)
        if cost > limit:
            return []  # too costly: the middle is shown as replaced
        trace.append(frontier[offset - d : offset + d + 1])
    return []  # not reached: d = n + m always ends


def _backtrack(trace: list[array[int]], x: int, y: int) -> list[tuple[int, int]]:
    pairs: list[tuple[int, int]] = []
    for d in range(len(trace) - 1, 0, -1):
        previous = trace[d - 1]
        k = x - y
        down = k == -d or (k != d and previous[k - 1 + d - 1] < previous[k + 1 + d - 1])
        previous_k = k + 1 if down else k - 1
        previous_x = previous[previous_k + d - 1]
        snake_start = previous_x if down else previous_x + 1
        while x > snake_start:
            x -= 1
            y -= 1
            pairs.append((x, y))
        x, y = previous_x, previous_x - previous_k
    while x > 0:
        x -= 1
        y -= 1
        pairs.append((x, y))
    pairs.reverse()
    return pairs
