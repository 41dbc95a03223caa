"""The kernel's frozen JSON (kernel.md §1, the ``Object.freeze`` and non-JSON rows)."""

from __future__ import annotations

import collections
import copy
import dataclasses
import datetime
import decimal
import math
import pickle
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, cast

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_kernel._json import (
    MAX_SAFE_INTEGER,
    FrozenDict,
    FrozenList,
    JsonDataError,
    check_json_document,
    decode_json,
    encode_json,
    freeze_json,
    thaw_json,
)


def loose(value: object) -> Any:
    return value


# ------------------------------------------------------------------ the frozen types
def test_frozen_values_compare_equal_to_plain_json_with_equal_content() -> None:
    plain: dict[str, object] = {"b": [1, 2.5, None, True, {"c": "x"}], "a": {}}
    frozen = freeze_json(plain)
    assert type(frozen) is FrozenDict
    assert frozen == plain
    assert plain == frozen
    assert frozen == freeze_json({"a": {}, "b": [1, 2.5, None, True, {"c": "x"}]})
    assert frozen != {"a": {}}
    assert freeze_json([1, [2]]) == [1, [2]]
    plain_list: list[object] = [1, [2]]
    assert plain_list == freeze_json([1, [2]])
    assert freeze_json([1, 2]) != (1, 2)
    assert freeze_json([1]) != "x"


def test_frozen_values_keep_order_and_read_like_dict_and_list() -> None:
    frozen = freeze_json({"z": 1, "a": [3, 4, 5]})
    assert isinstance(frozen, FrozenDict)
    assert list(frozen) == ["z", "a"]
    assert next(iter(frozen.items())) == ("z", 1)
    assert frozen.get("missing") is None
    assert "z" in frozen
    assert 1 not in frozen
    items = frozen["a"]
    assert isinstance(items, FrozenList)
    assert items[1] == 4
    assert items[-1] == 5
    assert type(items[1:]) is FrozenList
    assert items[1:] == [4, 5]
    assert items.index(5) == 2
    assert list(reversed(items)) == [5, 4, 3]
    assert encode_json(frozen) == b'{"z":1,"a":[3,4,5]}'


def test_frozen_values_raise_type_error_on_every_mutation() -> None:
    frozen = freeze_json({"a": [1]})
    assert isinstance(frozen, FrozenDict)
    items = frozen["a"]
    assert isinstance(items, FrozenList)
    mutations = [
        lambda: loose(frozen).__setitem__("a", 2),
        lambda: loose(frozen).__delitem__("a"),
        lambda: loose(frozen).update({"b": 1}),
        lambda: loose(frozen).pop("a"),
        lambda: loose(frozen).popitem(),
        lambda: loose(frozen).clear(),
        lambda: loose(frozen).setdefault("c", 1),
        lambda: setattr(frozen, "_data", {}),
        lambda: loose(items).__setitem__(0, 2),
        lambda: loose(items).__delitem__(0),
        lambda: loose(items).append(2),
        lambda: loose(items).extend([2]),
        lambda: loose(items).insert(0, 2),
        lambda: loose(items).pop(),
        lambda: loose(items).remove(1),
        lambda: loose(items).sort(),
        lambda: loose(items).reverse(),
        lambda: loose(items).clear(),
        lambda: setattr(items, "_items", ()),
    ]
    for mutate in mutations:
        with pytest.raises(TypeError):
            mutate()
    frozen_alias = loose(frozen)
    with pytest.raises(TypeError):
        frozen_alias |= {"b": 1}
    assert frozen == {"a": [1]}


def test_frozen_values_are_hashable_consistently_with_equality() -> None:
    first = freeze_json({"a": [1, {"b": None}], "c": 2})
    second = freeze_json({"c": 2, "a": [1, {"b": None}]})
    assert first == second
    assert hash(first) == hash(second)
    assert len({first, second}) == 1


def test_copies_and_pickles_keep_the_frozen_type() -> None:
    frozen = freeze_json({"a": [1, {"b": "c"}]})
    assert copy.copy(frozen) is frozen
    assert copy.deepcopy(frozen) is frozen
    restored = pickle.loads(pickle.dumps(frozen))
    assert type(restored) is FrozenDict
    assert restored == frozen


def test_constructors_validate_and_copy() -> None:
    source: dict[str, object] = {"a": [1]}
    frozen = FrozenDict(source)
    source["a"] = "changed"
    assert frozen == {"a": [1]}
    assert FrozenList((1, "x")) == [1, "x"]
    assert FrozenDict() == {}
    with pytest.raises(JsonDataError):
        FrozenDict({"a": math.nan})
    with pytest.raises(JsonDataError):
        FrozenDict(loose([1]))
    with pytest.raises(JsonDataError):
        FrozenList(loose({"a": 1}))


def test_thaw_json_gives_plain_mutable_copies() -> None:
    source: dict[str, object] = {"a": [1, {"b": []}]}
    thawed = thaw_json(freeze_json(source))
    assert type(thawed) is dict
    plain = cast("dict[str, object]", thawed)
    assert plain == source
    assert type(plain["a"]) is list


def test_the_shared_encoder_writes_compact_utf8_and_decoder_reads_plain_values() -> None:
    assert encode_json(freeze_json({"é": "✓"})) == '{"é":"✓"}'.encode()
    assert decode_json(b'{"a":[1]}') == {"a": [1]}
    assert type(decode_json(b'{"a":[1]}')) is dict
    with pytest.raises(TypeError):
        encode_json(object())


# ------------------------------------------------------------------ what is rejected
class _Str(str):
    __slots__ = ()


class _Int(int):
    pass


class _List(list[object]):
    pass


@dataclasses.dataclass
class _Record:
    a: int = 1


class _Hostile:
    """Any use beyond ``type()`` and ``id()`` fails the test."""

    def __getattribute__(self, name: str) -> object:
        raise AssertionError(f"attribute {name} was read")

    def __eq__(self, other: object) -> bool:
        raise AssertionError("__eq__ was called")

    def __hash__(self) -> int:
        raise AssertionError("__hash__ was called")

    def __iter__(self) -> object:
        raise AssertionError("__iter__ was called")


class _HostileMapping(Mapping[str, object]):
    def __getitem__(self, key: str) -> object:
        raise AssertionError("read")

    def __iter__(self) -> Any:
        raise AssertionError("iterated")

    def __len__(self) -> int:
        raise AssertionError("measured")


NON_JSON: list[object] = [
    {1, 2},
    frozenset(),
    b"bytes",
    bytearray(b"x"),
    decimal.Decimal("1.5"),
    1j,
    datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
    math.nan,
    math.inf,
    -math.inf,
    MAX_SAFE_INTEGER + 1,
    -MAX_SAFE_INTEGER - 1,
    2**80,
    "\ud800",
    "ok\udfff",
    len,
    lambda: None,
    object(),
    _Record(),
    _Str("x"),
    _Int(1),
    _List(),
    collections.OrderedDict(),
    MappingProxyType({}),
    {1: "non-string key"},
    {_Str("k"): 1},
    {"\udc00": 1},
    msgspec.UNSET,
]


@pytest.mark.parametrize("value", NON_JSON, ids=lambda value: type(value).__name__)
def test_non_json_values_are_rejected_without_touching_them(value: object) -> None:
    for candidate in (value, [value], {"k": value}, ("t", [{"deep": value}])):
        with pytest.raises(JsonDataError):
            freeze_json(candidate)


def test_hostile_objects_are_rejected_without_reading_or_calling_anything() -> None:
    for hostile in (_Hostile(), _HostileMapping()):
        for candidate in (hostile, [hostile], {"k": (hostile,)}):
            with pytest.raises(JsonDataError):
                freeze_json(candidate)
            with pytest.raises(JsonDataError):
                check_json_document(candidate)


def test_the_error_says_where_and_what() -> None:
    with pytest.raises(JsonDataError) as caught:
        freeze_json({"a": [0, {"b": math.nan}]})
    assert caught.value.location == "$.a[1].b"
    assert caught.value.reason == "non-finite number"


def test_safe_integer_bounds_are_inclusive() -> None:
    assert freeze_json([MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]) == [MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]


def test_depth_is_capped_with_the_root_at_zero() -> None:
    value: object = 1
    for _ in range(3):
        value = [value]
    assert freeze_json(value, max_depth=2) == [[[1]]]
    with pytest.raises(JsonDataError, match="nesting deeper than 1 levels"):
        freeze_json(value, max_depth=1)


def test_already_frozen_values_are_reused_but_still_count_against_limits() -> None:
    inner = freeze_json([[1, 2]])
    outer = freeze_json({"x": inner})
    assert isinstance(outer, FrozenDict)
    assert outer["x"] is inner
    with pytest.raises(JsonDataError, match="nesting deeper"):
        freeze_json({"x": inner}, max_depth=1)
    with pytest.raises(JsonDataError, match="more than 4 values"):
        freeze_json({"x": inner}, max_nodes=4)


def test_node_count_includes_containers_and_scalars() -> None:
    assert freeze_json([1, 2, 3], max_nodes=4) == [1, 2, 3]
    with pytest.raises(JsonDataError, match="more than 3 values"):
        freeze_json([1, 2, 3], max_nodes=3)


def test_cycles_are_rejected_and_shared_containers_only_on_request() -> None:
    cyclic: list[object] = []
    cyclic.append(cyclic)
    with pytest.raises(JsonDataError, match="cycle"):
        freeze_json(cyclic)
    looped: dict[str, object] = {}
    looped["me"] = {"again": looped}
    with pytest.raises(JsonDataError, match="cycle"):
        freeze_json(looped)
    shared = [1]
    assert freeze_json([shared, shared]) == [[1], [1]]
    with pytest.raises(JsonDataError, match="appears twice"):
        freeze_json([shared, shared], allow_shared=False)


@pytest.mark.parametrize("depth", [66, 1_000, 20_000])
def test_very_deep_input_is_rejected_without_recursion_error(depth: int) -> None:
    value: object = None
    for _ in range(depth):
        value = [value]
    with pytest.raises(JsonDataError):
        freeze_json(value)
    if depth > 1_000:
        with pytest.raises(JsonDataError):
            check_json_document(value)


def test_the_document_check_allows_big_integers_but_nothing_else_non_json() -> None:
    check_json_document({"a": [2**80, "x", 1.5, None]})
    with pytest.raises(JsonDataError):
        check_json_document({"a": math.inf})
    with pytest.raises(JsonDataError):
        check_json_document({"a": {1, 2}})


def test_max_depth_has_a_hard_upper_bound() -> None:
    with pytest.raises(ValueError, match="max_depth"):
        freeze_json([], max_depth=10_000)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=100, deadline=None, database=None)
@given(JSON)
def test_freezing_round_trips_through_the_encoder_and_equals_the_input(value: object) -> None:
    frozen = freeze_json(value)
    assert frozen == value
    assert encode_json(frozen) == encode_json(value)
    assert decode_json(encode_json(frozen)) == frozen
    assert freeze_json(frozen) is frozen or not isinstance(frozen, FrozenDict | FrozenList)
    assert hash(frozen) == hash(freeze_json(thaw_json(frozen)))
