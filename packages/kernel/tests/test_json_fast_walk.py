"""The fast JSON walks (issue #21) decide exactly as the exact walker does.

``freeze_json`` and ``check_json_document`` first try a recursive walk for the common, valid
case and hand every doubt to the iterative ``_Walker``. These tests compare the public
functions with the walker itself on generated values, valid and invalid alike: the same
frozen result, or the same error (reason and location), for every limit.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_kernel._json import (
    MAX_FROZEN_DEPTH,
    FrozenDict,
    FrozenList,
    JsonDataError,
    JsonValue,
    _Walker,  # pyright: ignore[reportPrivateUsage]
    check_json_document,
    freeze_json,
)


class Sub(str):
    """A ``str`` subclass: not JSON data for the kernel."""


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.sampled_from(["\ud800", "a\udfffb", "é\ud834", Sub("x"), 1j, b"bytes"]),
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.one_of(st.text(max_size=4), st.sampled_from(["\udc00", 1, None, Sub("k")]))
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(keys, children, max_size=4),
        st.dictionaries(st.text(max_size=3), children, max_size=3).map(_try_frozen),
    )


def _try_frozen(value: dict[str, Any]) -> object:
    try:
        return freeze_json(value)
    except JsonDataError:
        return value


VALUES = st.recursive(_SCALARS, _containers, max_leaves=24)


def _outcome(call: Any) -> tuple[str, object]:
    try:
        return "ok", call()
    except JsonDataError as error:
        return "error", (error.reason, error.location)


def _exact(value: object, **options: Any) -> JsonValue:
    return _Walker(**options).run(value)


def _same_frozen(left: object, right: object) -> bool:
    """Equal, of the same frozen types all the way down, with the same measured shape."""
    if type(left) is not type(right):
        return False
    if type(left) is FrozenDict:
        assert isinstance(left, FrozenDict)
        assert isinstance(right, FrozenDict)
        return (
            list(left) == list(right)
            and left._height == right._height  # pyright: ignore[reportPrivateUsage]
            and left._size == right._size  # pyright: ignore[reportPrivateUsage]
            and all(_same_frozen(left[key], right[key]) for key in left)
        )
    if type(left) is FrozenList:
        assert isinstance(left, FrozenList)
        assert isinstance(right, FrozenList)
        return (
            len(left) == len(right)
            and left._height == right._height  # pyright: ignore[reportPrivateUsage]
            and left._size == right._size  # pyright: ignore[reportPrivateUsage]
            and all(_same_frozen(a, b) for a, b in zip(left, right, strict=True))
        )
    if type(left) is float and math.isnan(left):
        return math.isnan(right)  # pyright: ignore[reportArgumentType]
    return left == right


@settings(max_examples=400, deadline=None)
@given(
    VALUES,
    st.integers(min_value=0, max_value=4),
    st.one_of(st.none(), st.integers(min_value=1, max_value=30)),
    st.booleans(),
)
def test_freeze_json_decides_as_the_exact_walker(
    value: object, max_depth: int, max_nodes: int | None, allow_shared: bool
) -> None:
    fast = _outcome(
        lambda: freeze_json(value, max_depth=max_depth, max_nodes=max_nodes, allow_shared=allow_shared)
    )
    exact = _outcome(
        lambda: _exact(
            value,
            max_depth=max_depth,
            max_nodes=max_nodes,
            allow_shared=allow_shared,
            safe_integers=True,
            build=True,
        )
    )
    assert fast[0] == exact[0]
    if fast[0] == "ok":
        assert _same_frozen(fast[1], exact[1])
    else:
        assert fast[1] == exact[1]


@settings(max_examples=400, deadline=None)
@given(VALUES, st.integers(min_value=0, max_value=4))
def test_check_json_document_decides_as_the_exact_walker(value: object, max_depth: int) -> None:
    fast = _outcome(lambda: check_json_document(value, max_depth=max_depth))
    exact = _outcome(
        lambda: _exact(
            value, max_depth=max_depth, max_nodes=None, allow_shared=True, safe_integers=False, build=False
        )
    )
    # check_json_document returns nothing; only the verdict and the error are compared.
    assert fast[0] == exact[0]
    if fast[0] == "error":
        assert fast[1] == exact[1]


def _cyclic() -> list[object]:
    loop: list[object] = [1]
    loop.append({"back": loop})
    return loop


def _deep(levels: int) -> object:
    value: object = "leaf"
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (_cyclic(), "a cycle"),
        (_deep(MAX_FROZEN_DEPTH + 5), f"nesting deeper than {MAX_FROZEN_DEPTH} levels"),
    ],
    ids=["cycle", "too-deep"],
)
def test_cycles_and_deep_values_get_the_exact_error(value: object, reason: str) -> None:
    with pytest.raises(JsonDataError) as frozen:
        freeze_json(value, max_depth=MAX_FROZEN_DEPTH)
    with pytest.raises(JsonDataError) as checked:
        check_json_document(value)
    assert frozen.value.reason == checked.value.reason == reason


def test_a_shared_container_is_refused_only_when_sharing_is_not_allowed() -> None:
    shared = {"a": 1}
    value = [shared, shared]
    assert freeze_json(value) == [{"a": 1}, {"a": 1}]
    with pytest.raises(JsonDataError) as caught:
        freeze_json(value, allow_shared=False)
    assert (caught.value.reason, caught.value.location) == ("a container that appears twice", "$[1]")
    frozen = freeze_json({"a": 1})
    with pytest.raises(JsonDataError):
        freeze_json([frozen, frozen], allow_shared=False)


def test_a_max_depth_out_of_range_is_a_value_error_on_both_paths() -> None:
    for depth in (-1, MAX_FROZEN_DEPTH + 1):
        with pytest.raises(ValueError, match="max_depth"):
            freeze_json({}, max_depth=depth)
        with pytest.raises(ValueError, match="max_depth"):
            check_json_document({}, max_depth=depth)
