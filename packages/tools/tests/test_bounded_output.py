"""Head-and-tail bounding of tool output to a JSON byte budget (``harness_tools._bounded_output``)."""

from __future__ import annotations

import pickle
import re
from collections import UserList
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_tools import ToolError
from harness_tools._bounded_output import (
    BOUND_TEXT_MIN_JSON_BYTES,
    TOOL_OUTPUT_BUDGET_INVALID,
    TOOL_OUTPUT_NOT_UTF8,
    BoundedItems,
    BoundedText,
    OutputBudgetError,
    OutputNotUtf8Error,
    bound_items,
    bound_text,
    dropped_bytes_marker,
    json_string_size,
)

PROPERTIES = settings(max_examples=400, deadline=None, database=None)
FEW = settings(max_examples=25, deadline=None, database=None)
KIB_128 = 128 * 1024

# Characters whose encoding is not one plain byte, and the bytes an escape is made of
# (a backslash followed by ``u00`` and hex digits must not be taken for an escape).
PIECES = [
    *("a", "u", "0", "1f", " ", "\n", "\t", "\r", "\r\n", '"', "\\", "\x00", "\x1f", "\x7f"),
    *("é", "\u2013", "日", "🙂", "\u2028", "\ufeff", "\\u0001", "\\\\n"),
]
SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff"]
encodable_text = st.lists(st.one_of(st.sampled_from(PIECES), st.characters(codec="utf-8")), max_size=300).map(
    "".join
)
any_text = st.lists(
    st.one_of(st.sampled_from(PIECES + SURROGATES), st.characters(exclude_categories=())), max_size=60
).map("".join)
# Newline-free text: no line boundary to move a cut to, so only the units decide it.
single_line_text = st.lists(
    st.one_of(st.sampled_from([p for p in PIECES if "\n" not in p]), st.characters(codec="utf-8")),
    max_size=300,
).map(lambda pieces: "".join(pieces).replace("\n", "n"))
text_budgets = st.integers(BOUND_TEXT_MIN_JSON_BYTES, 700)
head_shares = st.one_of(st.just(0.2), st.just(0.0), st.just(1.0), st.floats(0.0, 1.0))
item_names = st.one_of(st.sampled_from([*PIECES, "", "src/a.py"]), st.text(max_size=12))
items_lists = st.lists(item_names, max_size=40)


def loose(value: object) -> Any:
    """Hand a deliberately ill-typed value to the function under test."""
    return value


def encoded_size(value: object) -> int:
    return len(msgspec.json.encode(value))


def utf8_size(text: str) -> int:
    return len(text.encode("utf-8"))


def head_and_tail(original: str, result: BoundedText) -> tuple[str, str]:
    """Split a truncated result into the prefix and suffix of ``original`` around its marker."""
    marker = dropped_bytes_marker(result.dropped_bytes)
    # The original itself may contain marker-like text: some occurrence must split well.
    for found in re.finditer(re.escape(marker), result.text):
        head, tail = result.text[: found.start()], result.text[found.end() :]
        if original.startswith(head) and original.endswith(tail) and len(head) + len(tail) < len(original):
            return head, tail
    raise AssertionError(f"no marker splits {result.text!r} into a prefix and a suffix of the original")


def check_bounded(original: str, result: BoundedText, budget: int) -> tuple[str, str]:
    """The invariants every result of ``bound_text`` holds; returns the kept head and tail."""
    assert result.json_bytes == encoded_size(result.text) <= budget
    assert result.original_bytes == utf8_size(original)
    fits = encoded_size(original) <= budget
    assert result.truncated is not fits
    if fits:
        assert result.text is original
        assert result.dropped_bytes == 0
        return original, ""
    head, tail = head_and_tail(original, result)
    assert result.dropped_bytes == utf8_size(original) - utf8_size(head) - utf8_size(tail) > 0
    return head, tail


# ------------------------------------------------------------------ json_string_size


@PROPERTIES
@given(any_text)
def test_json_string_size_agrees_with_msgspec_or_refuses_what_msgspec_refuses(text: str) -> None:
    try:
        expected = encoded_size(text)
    except UnicodeEncodeError:
        with pytest.raises(OutputNotUtf8Error) as caught:
            json_string_size(text)
        first = next(i for i, char in enumerate(text) if 0xD800 <= ord(char) <= 0xDFFF)
        assert caught.value.position == first
        assert caught.value.code == TOOL_OUTPUT_NOT_UTF8
    else:
        assert json_string_size(text) == expected


@FEW
@given(encodable_text.filter(bool))
def test_json_string_size_agrees_with_msgspec_across_its_sizing_slices(piece: str) -> None:
    text = piece * (70_000 // len(piece) + 1)  # longer than one 64 Ki-character slice
    assert json_string_size(text) == encoded_size(text)


def test_json_string_size_names_a_surrogate_beyond_the_first_slice() -> None:
    text = "a" * 100_000 + "\udc80" + "b"
    with pytest.raises(OutputNotUtf8Error) as caught:
        json_string_size(text)
    assert caught.value.position == 100_000
    assert isinstance(caught.value.__cause__, UnicodeEncodeError)


@pytest.mark.parametrize(
    ("text", "size"),
    [("", 2), ("abc", 5), ("\n", 4), ('"', 4), ("\\", 4), ("\x01", 8), ("\x7f", 3), ("é", 4), ("🙂", 6)],
)
def test_json_string_size_counts_escapes_and_utf8_bytes(text: str, size: int) -> None:
    assert json_string_size(text) == size


def test_json_string_size_refuses_a_non_string() -> None:
    with pytest.raises(TypeError):
        json_string_size(loose(b"bytes"))


# ------------------------------------------------------------------ bound_text: properties


@PROPERTIES
@given(encodable_text, text_budgets, head_shares, st.integers(0, 40))
def test_bound_text_fits_the_budget_and_keeps_a_prefix_and_a_suffix(
    text: str, budget: int, head_share: float, line_snap_chars: int
) -> None:
    result = bound_text(text, budget, head_share=head_share, line_snap_chars=line_snap_chars)
    # The marker is there exactly when truncated: check_bounded splits a truncated result
    # at it and finds an untruncated one identical to the original.
    check_bounded(text, result, budget)
    assert bound_text(text, budget, head_share=head_share, line_snap_chars=line_snap_chars) == result


@PROPERTIES
@given(single_line_text, text_budgets, head_shares)
def test_bound_text_leaves_unused_only_a_straddling_character_and_shorter_count(
    text: str, budget: int, head_share: float
) -> None:
    result = bound_text(text, budget, head_share=head_share)
    if result.truncated:
        # Room is reserved for a count as long as the original's byte count; the tail may
        # stop short of the budget by less than one escape (six bytes).
        spare_digits = len(str(result.original_bytes)) - len(str(result.dropped_bytes))
        assert budget - result.json_bytes <= 5 + spare_digits


@PROPERTIES
@given(encodable_text, text_budgets)
def test_bound_text_returns_text_that_fits_unchanged(text: str, budget: int) -> None:
    budget = max(budget, encoded_size(text))
    result = bound_text(text, budget)
    size = encoded_size(text)
    assert result == BoundedText(
        text=text, truncated=False, dropped_bytes=0, original_bytes=utf8_size(text), json_bytes=size
    )


@PROPERTIES
@given(st.lists(st.text(alphabet="ab日\t", max_size=30), min_size=2, max_size=60), st.integers(60, 400))
def test_bound_text_cuts_just_before_and_just_after_a_newline_when_one_is_near(
    lines: list[str], budget: int
) -> None:
    text = "".join(f"{line}\n" for line in lines)
    result = bound_text(text, budget, line_snap_chars=1_000)
    head, tail = check_bounded(text, result, budget)
    if result.truncated:
        # Lines are at most 31 characters, well within the reach of a long head or tail.
        if len(head) >= 4 * 31:
            assert text[len(head)] == "\n"
        if len(tail) >= 4 * 31:
            assert text[len(text) - len(tail) - 1] == "\n"


# ------------------------------------------------------------------ bound_text: examples


def test_bound_text_keeps_a_fifth_of_the_room_for_the_head_by_default() -> None:
    # Room: 100 - 2 quotes - 32 for the marker of 1000 bytes = 66; a fifth is 13.
    result = bound_text("x" * 1000, 100)
    assert result.text == "x" * 13 + "\n[… 934 bytes dropped …]\n" + "x" * 53
    assert (result.dropped_bytes, result.original_bytes, result.json_bytes) == (934, 1000, 99)


def test_bound_text_of_empty_text_is_empty_text() -> None:
    assert bound_text("", BOUND_TEXT_MIN_JSON_BYTES) == BoundedText(
        text="", truncated=False, dropped_bytes=0, original_bytes=0, json_bytes=2
    )


def test_bound_text_keeps_text_exactly_at_the_budget_and_cuts_one_byte_over() -> None:
    text = "line\n" * 100 + "\x01"
    at_budget = bound_text(text, encoded_size(text))
    assert at_budget.text is text
    assert not at_budget.truncated
    over = bound_text(text, encoded_size(text) - 1)
    assert over.truncated
    check_bounded(text, over, encoded_size(text) - 1)


def test_bound_text_refuses_a_budget_too_small_for_the_marker_whatever_the_text() -> None:
    assert BOUND_TEXT_MIN_JSON_BYTES == encoded_size(dropped_bytes_marker(10**20 - 1)) == 50
    for text in ("", "x" * 1000):
        with pytest.raises(OutputBudgetError) as caught:
            bound_text(text, BOUND_TEXT_MIN_JSON_BYTES - 1)
        assert caught.value.code == TOOL_OUTPUT_BUDGET_INVALID
        assert isinstance(caught.value, ToolError)
        assert isinstance(caught.value, ValueError)
    result = bound_text("x" * 10**6, BOUND_TEXT_MIN_JSON_BYTES)
    check_bounded("x" * 10**6, result, BOUND_TEXT_MIN_JSON_BYTES)


@pytest.mark.parametrize(
    "arguments",
    [
        {"max_json_bytes": True},
        {"max_json_bytes": 1000.0},
        {"max_json_bytes": -1},
        {"head_share": -0.01},
        {"head_share": 1.01},
        {"head_share": float("nan")},
        {"head_share": "0.5"},
        {"line_snap_chars": -1},
        {"line_snap_chars": 1.5},
    ],
)
def test_bound_text_refuses_nonsensical_limits(arguments: dict[str, object]) -> None:
    call: dict[str, Any] = {"max_json_bytes": 1000, **arguments}
    with pytest.raises(OutputBudgetError) as caught:
        bound_text("x" * 2000, **call)
    assert caught.value.code == TOOL_OUTPUT_BUDGET_INVALID


def test_bound_text_refuses_a_non_string() -> None:
    with pytest.raises(TypeError):
        bound_text(loose(None), 1000)


@pytest.mark.parametrize("where", [0, 5_000, 99_999])
def test_bound_text_refuses_a_lone_surrogate_even_where_it_would_be_dropped(where: int) -> None:
    text = "a" * where + "\udfff" + "b" * (100_000 - where)
    with pytest.raises(OutputNotUtf8Error) as caught:
        bound_text(text, 1000)
    assert caught.value.position == where


def test_bound_text_of_multibyte_characters_only_keeps_whole_characters() -> None:
    text = "日本語" * 40_000  # 3 bytes each, 360 000 bytes
    result = bound_text(text, KIB_128)
    head, tail = check_bounded(text, result, KIB_128)
    assert result.dropped_bytes % 3 == 0
    assert KIB_128 - result.json_bytes < 3 + 4  # one character and two digits fewer at most
    assert len(head) == (len(head.encode()) // 3)
    assert len(tail) > 4 * len(head) - 2


def test_bound_text_of_control_characters_only_never_splits_an_escape() -> None:
    text = "\x01" * 100_000  # each escapes to six bytes: \u0001
    for budget in range(BOUND_TEXT_MIN_JSON_BYTES, BOUND_TEXT_MIN_JSON_BYTES + 12):
        result = bound_text(text, budget)
        check_bounded(text, result, budget)
    result = bound_text(text, KIB_128)
    head, tail = check_bounded(text, result, KIB_128)
    assert set(head + tail) == {"\x01"}
    assert KIB_128 - result.json_bytes <= 5


@pytest.mark.parametrize(
    "unit",
    ["\\", "\\\\n", "\\u0001", "\\\x01", "\x01\\", '\\"', "\\é", "🙂\\\n", "\\n\\u00", "\r\n\\\\"],
)
def test_bound_text_cuts_between_escapes_at_every_budget_and_share(unit: str) -> None:
    # Runs of backslashes are where an escaped backslash (\\) can pass for the opening of
    # an escape; every budget in a window of 40 puts a cut at every offset of the unit.
    text = unit * 400
    for budget in range(BOUND_TEXT_MIN_JSON_BYTES, BOUND_TEXT_MIN_JSON_BYTES + 40):
        for head_share in (0.0, 0.2, 0.5, 1.0):
            result = bound_text(text, budget, head_share=head_share, line_snap_chars=0)
            check_bounded(text, result, budget)


def test_bound_text_keeps_a_line_the_cut_already_ends_at() -> None:
    text = "abcd\n" * 1000  # a line: 6 bytes of JSON; the marker of 5000 bytes: 32 + 2
    # The head gets all the room, 64 bytes: ten lines and "abcd", whose newline is the
    # first byte dropped. The cut is on a line boundary already and stays there.
    result = bound_text(text, 34 + 64, head_share=1.0)
    assert result.text == "abcd\n" * 10 + "abcd" + dropped_bytes_marker(5000 - 54)
    # The tail gets all the room: ten whole lines fit exactly, the newline before them is dropped.
    result = bound_text(text, 34 + 60, head_share=0.0)
    assert result.text == dropped_bytes_marker(5000 - 50) + "abcd\n" * 10


def test_bound_text_with_head_share_zero_keeps_only_the_tail() -> None:
    result = bound_text("abcdefghij" * 100, 80, head_share=0.0)
    assert result.text.startswith("\n[… ")
    assert result.text.endswith("ghij")


def test_bound_text_of_a_20_mb_test_run_keeps_its_end() -> None:
    passing = "tests/test_module.py::test_case[param] PASSED                     [ 42%]\n"
    ending = "FAILED tests/test_last.py::test_it - assert 1 == 2\n==== 1 failed, 262143 passed ====\n"
    text = passing * (20_000_000 // len(passing)) + ending
    result = bound_text(text, KIB_128)
    head, tail = check_bounded(text, result, KIB_128)
    assert result.text.endswith(ending)
    assert head.endswith("[ 42%]")  # cut before a newline: whole lines on both sides
    assert tail.startswith("tests/")
    assert KIB_128 - 300 < result.json_bytes <= KIB_128


def test_bound_text_of_20_mb_of_mixed_text_fits() -> None:
    text = 'naïve — 日本 🙂 \t"q"\n' * 800_000
    result = bound_text(text, KIB_128)
    check_bounded(text, result, KIB_128)
    assert result.original_bytes == utf8_size(text) > 20_000_000


def test_output_errors_survive_pickling() -> None:
    with pytest.raises(OutputNotUtf8Error) as caught:
        bound_items(["ok", "b\ud800d"], 100)
    error = caught.value
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.code, copy.message, copy.position, copy.item_index) == (
        OutputNotUtf8Error,
        TOOL_OUTPUT_NOT_UTF8,
        error.message,
        1,
        1,
    )


# ------------------------------------------------------------------ bound_items


@PROPERTIES
@given(items_lists, st.integers(2, 200), head_shares)
def test_bound_items_fits_and_keeps_whole_items_from_both_ends(
    items: list[str], budget: int, head_share: float
) -> None:
    result = bound_items(items, budget, head_share=head_share)
    kept = list(result.items)
    assert result.json_bytes == encoded_size(kept) <= budget
    assert result.truncated is (encoded_size(items) > budget)
    assert result.dropped_items == len(items) - len(kept)
    head, tail = kept[: result.head_count], kept[result.head_count :]
    assert items[: len(head)] == head
    assert items[len(items) - len(tail) :] == tail
    if not result.truncated:
        assert kept == items
    else:
        assert result.dropped_items > 0
        # The tail takes everything the head leaves: one more item would not fit.
        one_more = [*head, items[len(items) - len(tail) - 1], *tail]
        assert encoded_size(one_more) > budget
    assert bound_items(items, budget, head_share=head_share) == result


def test_bound_items_keeps_half_for_the_head_by_default() -> None:
    names = [f"f{index}" for index in range(1000)]
    # Room: 62 - 2 brackets + 1 (the last item has no comma) = 61. The head gets 30: six
    # items of 5 bytes ("f0",). The tail gets 31: four items of 7 ("f999",), a fifth would
    # make 35. The array: 30 + 28 - 1 + 2 = 59 bytes.
    result = bound_items(names, 62)
    assert result == BoundedItems(
        items=("f0", "f1", "f2", "f3", "f4", "f5", "f996", "f997", "f998", "f999"),
        truncated=True,
        dropped_items=990,
        head_count=6,
        json_bytes=59,
    )


def test_bound_items_does_not_skip_an_item_that_blocks_the_head() -> None:
    items = ["x" * 100, "a", "b", "c"]
    result = bound_items(items, 20, head_share=1.0)
    assert result.items == ("a", "b", "c")
    assert result.head_count == 0
    assert result.dropped_items == 1


def test_bound_items_of_an_empty_listing_and_the_smallest_budget() -> None:
    assert bound_items([], 2) == BoundedItems(
        items=(), truncated=False, dropped_items=0, head_count=0, json_bytes=2
    )
    assert bound_items(["a"], 2) == BoundedItems(
        items=(), truncated=True, dropped_items=1, head_count=0, json_bytes=2
    )
    with pytest.raises(OutputBudgetError):
        bound_items([], 1)


def test_bound_items_accepts_any_sequence_and_returns_a_tuple() -> None:
    result = bound_items(UserList(["a", "b"]), 100)
    assert result.items == ("a", "b")


def test_bound_items_refuses_a_lone_surrogate_in_any_item() -> None:
    items = [f"file{index}" for index in range(10_000)]
    items[7_000] = "bad\udc80name"
    with pytest.raises(OutputNotUtf8Error) as caught:
        bound_items(items, 100)
    assert (caught.value.item_index, caught.value.position) == (7_000, 3)
