"""Bounded JSON (kernel.md §8.12): the gate for tool arguments, outputs and schemas."""

from __future__ import annotations

import math

import pytest

from harness_kernel._bounded import (
    BOUNDED_JSON_MAX_BYTES,
    BOUNDED_JSON_MAX_NODES,
    BoundedJsonError,
    bounded_json,
)
from harness_kernel._json import FrozenDict, FrozenList


def nested(depth: int) -> object:
    value: object = []
    for _ in range(depth):
        value = [value]
    return value


def test_json_data_comes_back_frozen_with_its_compact_encoding() -> None:
    frozen, wire = bounded_json({"path": "a.txt", "lines": [1, 2.5, None, True]})

    assert type(frozen) is FrozenDict
    assert type(frozen["lines"]) is FrozenList
    assert frozen == {"path": "a.txt", "lines": [1, 2.5, None, True]}
    assert wire == b'{"path":"a.txt","lines":[1,2.5,null,true]}'


def test_containers_are_allowed_through_depth_63_and_refused_at_64() -> None:
    bounded_json(nested(63))
    with pytest.raises(BoundedJsonError):
        bounded_json(nested(64))


def test_at_most_ten_thousand_values() -> None:
    bounded_json([0] * (BOUNDED_JSON_MAX_NODES - 1))  # the list itself is a value too
    with pytest.raises(BoundedJsonError):
        bounded_json([0] * BOUNDED_JSON_MAX_NODES)


def test_a_container_met_twice_is_refused_even_without_a_cycle() -> None:
    shared: list[object] = []
    with pytest.raises(BoundedJsonError):
        bounded_json([shared, shared])


def test_an_encoding_over_256_kib_is_refused() -> None:
    bounded_json("x" * (BOUNDED_JSON_MAX_BYTES - 2))  # two bytes of quotes
    with pytest.raises(BoundedJsonError):
        bounded_json("x" * (BOUNDED_JSON_MAX_BYTES - 1))


@pytest.mark.parametrize(
    "value",
    [math.nan, math.inf, 2**53, {1: "a"}, {"a": {1, 2}}, b"bytes", "\ud800"],
    ids=["nan", "inf", "unsafe-int", "int-key", "set", "bytes", "lone-surrogate"],
)
def test_non_json_values_are_refused(value: object) -> None:
    with pytest.raises(BoundedJsonError):
        bounded_json(value)
