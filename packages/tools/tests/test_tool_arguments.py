"""``parse_tool_arguments``: hostile model arguments get one typed error and no effect.

Model-supplied arguments may have wrong types, extra keys, huge strings or deep nesting.
Unit tests pin each rule; hypothesis then throws arbitrary values (JSON and non-JSON) at the
parser and checks that only ``InvalidToolArgumentsError`` ever escapes.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final, TypeVar, cast

import msgspec
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from harness_tools import (
    TOOL_ARGUMENTS_INVALID,
    ArgumentLimits,
    InvalidToolArgumentsError,
    InvalidWorkspacePathError,
    ReadFileParameters,
    Tool,
    ToolError,
    ToolExecutionContext,
    ToolPermissionIntent,
    check_workspace_path,
    create_echo_tool,
    create_read_file_tool,
    create_tool,
    parse_tool_arguments,
)

P = TypeVar("P")

DEFAULT_LIMITS: Final = ArgumentLimits()
NOT_AN_OBJECT: Final = "tool arguments must be a JSON object"

READ_FILE: Final = create_read_file_tool("/srv/checkout")
ECHO: Final = create_echo_tool()

PROPERTY_SETTINGS: Final = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)

# ------------------------------------------------------------------ odd values


class StrSubclass(str):
    """A ``str`` subclass."""


class IntSubclass(int):
    """An ``int`` subclass."""


class FloatSubclass(float):
    """A ``float`` subclass."""


class DictSubclass(dict[object, object]):
    """A ``dict`` subclass."""


class ListSubclass(list[object]):
    """A ``list`` subclass."""


@dataclasses.dataclass(frozen=True)
class DataclassValue:
    path: str = "a.txt"


class CountParameters(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    count: int
    ratio: float = 0.0
    enabled: bool = False


async def count_items(params: CountParameters, context: ToolExecutionContext | None = None) -> object:
    return params.count


COUNT: Final = create_tool(name="count", description="", parameters=CountParameters, execute=count_items)


def rejection(
    arguments: object, tool: Tool[object] | None = None, limits: ArgumentLimits = DEFAULT_LIMITS
) -> InvalidToolArgumentsError:
    """Parse ``arguments`` (for ``read_file`` by default), expecting the typed error, and return it."""
    with pytest.raises(InvalidToolArgumentsError) as caught:
        parse_tool_arguments(
            cast(Tool[object], READ_FILE) if tool is None else tool, arguments, limits=limits
        )
    assert caught.value.code == TOOL_ARGUMENTS_INVALID
    return caught.value


def echo_rejection(arguments: object, limits: ArgumentLimits = DEFAULT_LIMITS) -> InvalidToolArgumentsError:
    return rejection(arguments, cast(Tool[object], ECHO), limits)


def nested_lists(levels: int, leaf: object = None) -> object:
    """``levels`` lists nested inside each other around ``leaf`` (``levels == 0`` is ``leaf``)."""
    value = leaf
    for _ in range(levels):
        value = [value]
    return value


def nested_objects(levels: int, leaf: object = None) -> object:
    """``levels`` objects nested inside each other around ``leaf``."""
    value = leaf
    for _ in range(levels):
        value = {"next": value}
    return value


# ------------------------------------------------------------------ valid arguments


def test_valid_read_file_arguments_parse_into_its_parameters() -> None:
    params = parse_tool_arguments(READ_FILE, {"path": "src/app.py"})

    assert type(params) is ReadFileParameters
    assert params == ReadFileParameters(path="src/app.py")


def test_valid_arguments_are_not_changed_by_parsing() -> None:
    arguments: dict[str, object] = {"text": "hi", "items": [1, {"a": None}]}

    parse_tool_arguments(ECHO, arguments)

    assert arguments == {"text": "hi", "items": [1, {"a": None}]}


def test_echo_arguments_parse_into_an_equal_object() -> None:
    arguments: dict[str, object] = {
        "text": "h\u00e9",
        "int": -(2**53 - 1),
        "float": 2.5,
        "flags": [True, False, None],
        "nested": {"deeper": {"list": []}},
        "": "empty key",
    }

    assert parse_tool_arguments(ECHO, arguments) == arguments


def test_parsing_never_runs_authorization_or_execute() -> None:
    calls: list[str] = []

    async def execute(params: ReadFileParameters, context: ToolExecutionContext | None = None) -> object:
        calls.append("execute")
        return None

    def authorize(params: ReadFileParameters) -> ToolPermissionIntent:
        calls.append("authorization")
        return ToolPermissionIntent(action="fs.read")

    tool = create_tool(
        name="recording",
        description="",
        parameters=ReadFileParameters,
        execute=execute,
        authorization=authorize,
    )

    parse_tool_arguments(tool, {"path": "a.txt"})
    rejection({"path": 1}, cast(Tool[object], tool))

    assert calls == []


# ------------------------------------------------------------------ not an object


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param(None, id="none"),
        pytest.param('{"path": "a.txt"}', id="undecoded-json-text"),
        pytest.param(b'{"path": "a.txt"}', id="bytes"),
        pytest.param([["path", "a.txt"]], id="list-of-pairs"),
        pytest.param((("path", "a.txt"),), id="tuple-of-pairs"),
        pytest.param(collections.OrderedDict([("path", "a.txt")]), id="ordered-dict"),
        pytest.param(collections.defaultdict(str, {"path": "a.txt"}), id="defaultdict"),
        pytest.param(DictSubclass({"path": "a.txt"}), id="dict-subclass"),
        pytest.param(collections.UserDict({"path": "a.txt"}), id="userdict"),
        pytest.param(MappingProxyType({"path": "a.txt"}), id="mappingproxy"),
        pytest.param(ReadFileParameters(path="a.txt"), id="already-parameters"),
        pytest.param(DataclassValue(), id="dataclass"),
        pytest.param(1, id="int"),
    ],
)
def test_arguments_that_are_not_an_exact_dict_are_refused(arguments: object) -> None:
    error = rejection(arguments)

    assert str(error) == NOT_AN_OBJECT
    assert error.path == "$"


def test_argument_errors_are_typed_tool_errors() -> None:
    error = rejection(None)

    assert isinstance(error, ToolError)
    assert error.code == "TOOL_ARGUMENTS_INVALID"


# ------------------------------------------------------------------ conversion into the parameters


@pytest.mark.parametrize(
    ("arguments", "path"),
    [
        pytest.param({}, "$", id="missing-path"),
        pytest.param({"path": "a.txt", "mode": "w"}, "$", id="extra-key"),
        pytest.param({"path": "a.txt", "Path": "b.txt"}, "$", id="extra-key-differing-in-case"),
        pytest.param({"file": "a.txt"}, "$", id="misspelt-key"),
        pytest.param({"path": ""}, "$.path", id="empty-path"),
        pytest.param({"path": None}, "$.path", id="none-path"),
        pytest.param({"path": 1}, "$.path", id="int-path"),
        pytest.param({"path": 1.5}, "$.path", id="float-path"),
        pytest.param({"path": True}, "$.path", id="bool-path"),
        pytest.param({"path": ["a.txt"]}, "$.path", id="list-path"),
        pytest.param({"path": {"name": "a.txt"}}, "$.path", id="object-path"),
    ],
)
def test_arguments_that_do_not_fit_the_parameters_are_refused(arguments: object, path: str) -> None:
    error = rejection(arguments)

    assert error.path == path
    assert "read_file" in str(error)
    assert isinstance(error.__cause__, msgspec.ValidationError)


@pytest.mark.parametrize(
    ("arguments", "path"),
    [
        pytest.param({"count": True}, "$.count", id="bool-for-int"),
        pytest.param({"count": 5.0}, "$.count", id="integral-float-for-int"),
        pytest.param({"count": "5"}, "$.count", id="string-for-int"),
        pytest.param({"count": 1, "enabled": 1}, "$.enabled", id="int-for-bool"),
        pytest.param({"count": 1, "ratio": "0.5"}, "$.ratio", id="string-for-float"),
    ],
)
def test_conversion_is_strict_and_never_coerces(arguments: object, path: str) -> None:
    assert rejection(arguments, cast(Tool[object], COUNT)).path == path


def test_strict_conversion_accepts_exact_types() -> None:
    assert parse_tool_arguments(COUNT, {"count": 3, "ratio": 0.25, "enabled": True}) == CountParameters(
        count=3, ratio=0.25, enabled=True
    )


# ------------------------------------------------------------------ non-JSON values


def as_path(value: object) -> object:
    return {"path": value}


def under_an_extra_key(value: object) -> object:
    return {"path": "a", "extra": value}


def in_a_list(value: object) -> object:
    return {"path": "a", "list": [0, value]}


def deeply(value: object) -> object:
    return {"o": {"p": [{"q": value}]}}


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({1, 2}, id="set"),
        pytest.param(frozenset({"a"}), id="frozenset"),
        pytest.param(b"bytes", id="bytes"),
        pytest.param(bytearray(b"bytes"), id="bytearray"),
        pytest.param(("a", "b"), id="tuple"),
        pytest.param(1j, id="complex"),
        pytest.param(math.nan, id="nan"),
        pytest.param(math.inf, id="inf"),
        pytest.param(-math.inf, id="negative-inf"),
        pytest.param(2**64, id="int-2-to-64"),
        pytest.param(-(2**63) - 1, id="int-below-minus-2-to-63"),
        pytest.param(10**100, id="googol"),
        pytest.param(StrSubclass("a.txt"), id="str-subclass"),
        pytest.param(IntSubclass(1), id="int-subclass"),
        pytest.param(FloatSubclass(1.5), id="float-subclass"),
        pytest.param(collections.OrderedDict[str, object](), id="ordered-dict"),
        pytest.param(DictSubclass(), id="dict-subclass"),
        pytest.param(ListSubclass(), id="list-subclass"),
        pytest.param(MappingProxyType[str, object]({}), id="mappingproxy"),
        pytest.param(DataclassValue(), id="dataclass"),
        pytest.param(ReadFileParameters(path="a.txt"), id="struct"),
        pytest.param(object(), id="object"),
        pytest.param(..., id="ellipsis"),
        pytest.param(print, id="function"),
        pytest.param(iter([]), id="iterator"),
    ],
)
@pytest.mark.parametrize(
    ("place", "path"),
    [
        pytest.param(as_path, "$.path", id="as-path"),
        pytest.param(under_an_extra_key, "$.extra", id="under-an-extra-key"),
        pytest.param(in_a_list, "$.list[1]", id="in-a-list"),
        pytest.param(deeply, "$.o.p[0].q", id="deeply"),
    ],
)
def test_non_json_values_are_refused_where_they_are(
    value: object, place: Callable[[object], object], path: str
) -> None:
    arguments = place(value)

    read_file_error = rejection(arguments)
    echo_error = echo_rejection(arguments)

    assert read_file_error.path == echo_error.path == path


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(2**53 - 1, id="largest-safe-integer"),
        pytest.param(-(2**53 - 1), id="smallest-safe-integer"),
        pytest.param(1.7976931348623157e308, id="largest-float"),
        pytest.param(-0.0, id="negative-zero"),
        pytest.param(5e-324, id="smallest-float"),
    ],
)
def test_finite_numbers_within_range_are_json(value: object) -> None:
    assert parse_tool_arguments(ECHO, {"value": value}) == {"value": value}


@pytest.mark.parametrize(
    ("arguments", "path"),
    [
        pytest.param({1: "a.txt"}, "$", id="int-key"),
        pytest.param({None: "a.txt", "path": "a.txt"}, "$", id="none-key"),
        pytest.param({("path",): "a.txt"}, "$", id="tuple-key"),
        pytest.param({StrSubclass("path"): "a.txt"}, "$", id="str-subclass-key"),
        pytest.param({"path": "a", "meta": {b"k": 1}}, "$.meta", id="nested-bytes-key"),
        pytest.param({"path": "a", "meta": [{2: 1}]}, "$.meta[0]", id="nested-int-key-in-list"),
    ],
)
def test_non_string_keys_are_refused(arguments: object, path: str) -> None:
    assert rejection(arguments).path == path


def test_cyclic_object_is_refused() -> None:
    arguments: dict[str, object] = {"path": "a.txt"}
    arguments["self"] = arguments

    assert echo_rejection(arguments).path == "$.self"


def test_cyclic_list_is_refused() -> None:
    loop: list[object] = []
    loop.append(loop)

    assert echo_rejection({"loop": loop}).path == "$.loop[0]"


def test_shared_acyclic_values_are_allowed() -> None:
    shared: list[object] = [1, {"x": "y"}]
    arguments: dict[str, object] = {"a": shared, "b": shared, "c": [shared, shared]}

    assert parse_tool_arguments(ECHO, arguments) == arguments


# ------------------------------------------------------------------ limits


def list_of(count: int) -> object:
    return {"list": list(range(count))}


def object_of(count: int) -> object:
    return {"object": {str(index): 0 for index in range(count)}}


def arguments_of(count: int) -> object:
    return {str(index): 0 for index in range(count)}


def test_default_limits_are_documented() -> None:
    limits = ArgumentLimits()

    assert limits.max_depth == 32
    assert limits.max_string_length == 1_048_576
    assert limits.max_items == 10_000
    assert limits.max_nodes == 100_000


@pytest.mark.parametrize("nest", [nested_lists, nested_objects], ids=["lists", "objects"])
@pytest.mark.parametrize(
    "limits",
    [pytest.param(DEFAULT_LIMITS, id="default"), pytest.param(ArgumentLimits(max_depth=3), id="three")],
)
def test_containers_as_deep_as_max_depth_are_allowed(
    nest: Callable[[int, object], object], limits: ArgumentLimits
) -> None:
    # The arguments object is depth 0, so its value under "deep" is depth 1 and the
    # innermost of max_depth nested containers is at depth max_depth.
    arguments = {"deep": nest(limits.max_depth, "leaf")}

    assert parse_tool_arguments(ECHO, arguments, limits=limits) == arguments


@pytest.mark.parametrize("nest", [nested_lists, nested_objects], ids=["lists", "objects"])
@pytest.mark.parametrize(
    "limits",
    [pytest.param(DEFAULT_LIMITS, id="default"), pytest.param(ArgumentLimits(max_depth=3), id="three")],
)
def test_containers_deeper_than_max_depth_are_refused(
    nest: Callable[[int, object], object], limits: ArgumentLimits
) -> None:
    error = echo_rejection({"deep": nest(limits.max_depth + 1, "leaf")}, limits)

    assert error.path.startswith("$.deep")


@pytest.mark.parametrize("levels", [100, 10_000, 100_000])
def test_extremely_deep_nesting_is_refused_without_recursing_into_it(levels: int) -> None:
    assert echo_rejection({"deep": nested_lists(levels)}).code == TOOL_ARGUMENTS_INVALID
    assert rejection({"path": nested_objects(levels)}).path.startswith("$.path")


def test_string_of_max_length_is_allowed() -> None:
    # Through echo: read_file's own path grammar stops at 4,096 characters.
    text = "a" * DEFAULT_LIMITS.max_string_length

    assert parse_tool_arguments(ECHO, {"text": text}) == {"text": text}


def test_string_length_counts_code_points_not_bytes() -> None:
    text = "\u20ac" * DEFAULT_LIMITS.max_string_length

    assert parse_tool_arguments(ECHO, {"text": text}) == {"text": text}


def test_string_longer_than_the_limit_is_refused() -> None:
    path = "a" * (DEFAULT_LIMITS.max_string_length + 1)

    assert rejection({"path": path}).path == "$.path"


def test_key_longer_than_the_limit_is_refused() -> None:
    key = "k" * (DEFAULT_LIMITS.max_string_length + 1)

    assert echo_rejection({"outer": {key: 1}}).path == "$.outer"


@pytest.mark.parametrize(
    ("arguments", "accepted"),
    [
        pytest.param({"abc": "abc"}, True, id="key-and-value-at-the-limit"),
        pytest.param({"abc": "abcd"}, False, id="value-over-the-limit"),
        pytest.param({"abcd": "abc"}, False, id="key-over-the-limit"),
        pytest.param({"a": ["abc", "abcd"]}, False, id="list-item-over-the-limit"),
    ],
)
def test_custom_string_limit_applies_to_keys_and_values(arguments: dict[str, object], accepted: bool) -> None:
    limits = ArgumentLimits(max_string_length=3)

    if accepted:
        assert parse_tool_arguments(ECHO, arguments, limits=limits) == arguments
    else:
        echo_rejection(arguments, limits)


def test_containers_of_max_items_are_allowed() -> None:
    arguments: dict[str, object] = {
        "list": list(range(DEFAULT_LIMITS.max_items)),
        "object": {str(index): index for index in range(DEFAULT_LIMITS.max_items)},
    }

    assert parse_tool_arguments(ECHO, arguments) == arguments


@pytest.mark.parametrize(
    ("make", "path"),
    [
        pytest.param(list_of, "$.list", id="list"),
        pytest.param(object_of, "$.object", id="object"),
        pytest.param(arguments_of, "$", id="arguments-object"),
    ],
)
def test_containers_over_max_items_are_refused(make: Callable[[int], object], path: str) -> None:
    assert echo_rejection(make(DEFAULT_LIMITS.max_items + 1)).path == path
    assert echo_rejection(make(4), ArgumentLimits(max_items=3)).path == path


def test_argument_trees_of_max_nodes_are_allowed() -> None:
    # The arguments object, the list and its three items: five values.
    arguments: dict[str, object] = {"a": [1, 2, 3]}

    assert parse_tool_arguments(ECHO, arguments, limits=ArgumentLimits(max_nodes=5)) == arguments


def test_argument_trees_over_max_nodes_are_refused() -> None:
    echo_rejection({"a": [1, 2, 3, 4]}, ArgumentLimits(max_nodes=5))


def test_default_node_limit_bounds_many_containers_each_within_the_item_limit() -> None:
    chunk = list(range(DEFAULT_LIMITS.max_items))
    arguments = {f"chunk{index}": list(chunk) for index in range(10)}

    echo_rejection(arguments)


# ------------------------------------------------------------------ hypothesis

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=st.characters(codec=None), max_size=20),
)

json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.text(max_size=8), children, max_size=5),
    ),
    max_leaves=20,
)

hostile_scalars = st.one_of(
    st.sets(st.integers(), max_size=3),
    st.frozensets(st.text(max_size=3), max_size=3),
    st.binary(max_size=10),
    st.builds(bytearray, st.binary(max_size=10)),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.integers(min_value=2**53, max_value=2**200),
    st.integers(max_value=-(2**53), min_value=-(2**200)),
    st.integers(),
    st.complex_numbers(max_magnitude=10),
    st.builds(StrSubclass, st.text(max_size=5)),
    st.builds(IntSubclass, st.integers(-5, 5)),
    st.builds(FloatSubclass, st.floats(allow_nan=False)),
    st.builds(DataclassValue),
    st.builds(ReadFileParameters, path=st.sampled_from(["", "a.txt", "src/app.py"])),
    st.builds(object),
    st.just(...),
)

strings_around_the_length_limit = st.integers(
    min_value=DEFAULT_LIMITS.max_string_length - 1, max_value=DEFAULT_LIMITS.max_string_length + 1
).map(lambda length: "p" * length)

hashable_non_string_keys = st.one_of(
    st.integers(),
    st.none(),
    st.booleans(),
    st.binary(max_size=4),
    st.builds(StrSubclass, st.text(max_size=4)),
    st.tuples(st.text(max_size=2)),
)


def dict_subclass(items: Mapping[str, object]) -> object:
    return DictSubclass(items.items())


def wrap_deeply(value: object, shapes: list[bool]) -> object:
    """Wrap ``value`` in one list (True) or object (False) per entry of ``shapes``."""
    for is_list in shapes:
        value = [value] if is_list else {"d": value}
    return value


deep_values = st.builds(
    wrap_deeply,
    st.one_of(json_scalars, hostile_scalars),
    st.lists(st.booleans(), min_size=DEFAULT_LIMITS.max_depth - 3, max_size=DEFAULT_LIMITS.max_depth + 5),
)

hostile_values = st.recursive(
    st.one_of(json_scalars, hostile_scalars),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(st.text(max_size=6), children, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=4), hashable_non_string_keys), children, max_size=3),
        st.dictionaries(st.text(max_size=4), children, max_size=3).map(collections.OrderedDict),
        st.dictionaries(st.text(max_size=4), children, max_size=3).map(dict_subclass),
        st.lists(children, max_size=3).map(ListSubclass),
        st.dictionaries(st.text(max_size=4), children, max_size=3).map(MappingProxyType),
        deep_values,
    ),
    max_leaves=15,
)

read_file_shaped = st.one_of(
    st.fixed_dictionaries({"path": hostile_values}),
    st.fixed_dictionaries({"path": st.text(max_size=10)}, optional={"extra": hostile_values}),
    st.fixed_dictionaries({"path": hostile_values}, optional={"mode": hostile_values, "Path": json_values}),
    st.dictionaries(st.sampled_from(["path", "Path", "file", "operation"]), hostile_values, max_size=3),
    st.fixed_dictionaries({"path": st.text(min_size=1, max_size=10)}).map(dict_subclass),
    st.fixed_dictionaries({"path": st.text(min_size=1, max_size=10)}).map(collections.OrderedDict),
    st.fixed_dictionaries({"path": st.text(alphabet=st.characters(codec=None), min_size=1, max_size=10)}),
    st.fixed_dictionaries({"path": strings_around_the_length_limit}),
    st.fixed_dictionaries({"path": st.just("a.txt")}, optional={"extra": strings_around_the_length_limit}),
    st.dictionaries(strings_around_the_length_limit, json_scalars, min_size=1, max_size=1),
)

arbitrary_arguments = st.one_of(hostile_values, read_file_shaped, deep_values)


def parse_outcome(tool: Tool[P], arguments: object) -> P | InvalidToolArgumentsError:
    """Parse ``arguments``; return the typed error instead of raising it. Any other exception escapes."""
    try:
        return parse_tool_arguments(tool, arguments)
    except InvalidToolArgumentsError as error:
        return error


def describe(outcome: object) -> str:
    """A hypothesis event label: parsed, or the kind of refusal."""
    if isinstance(outcome, InvalidToolArgumentsError):
        return "refused: " + outcome.message.split(":")[0].removeprefix("tool arguments ")[:40]
    return "parsed"


def is_valid_read_file_arguments(arguments: object) -> bool:
    if type(arguments) is not dict:
        return False
    fields = cast(dict[object, object], arguments)
    if list(fields) != ["path"]:
        return False
    path = fields["path"]
    return type(path) is str and 1 <= len(path) <= DEFAULT_LIMITS.max_string_length and is_canonical(path)


def is_canonical(path: str) -> bool:
    try:
        check_workspace_path(path)
    except InvalidWorkspacePathError:
        return False
    return True


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(arbitrary_arguments)
def test_read_file_arguments_either_parse_or_raise_the_typed_error(arguments: object) -> None:
    outcome = parse_outcome(READ_FILE, arguments)
    event(describe(outcome))

    if isinstance(outcome, InvalidToolArgumentsError):
        assert outcome.code == TOOL_ARGUMENTS_INVALID
        assert outcome.path.startswith("$")
        assert not is_valid_read_file_arguments(arguments)
    else:
        assert type(outcome) is ReadFileParameters
        assert is_valid_read_file_arguments(arguments)
        assert outcome.path == cast(dict[str, object], arguments)["path"]


@PROPERTY_SETTINGS
@given(arbitrary_arguments)
def test_echo_arguments_either_parse_or_raise_the_typed_error(arguments: object) -> None:
    outcome = parse_outcome(ECHO, arguments)
    event(describe(outcome))

    if isinstance(outcome, InvalidToolArgumentsError):
        assert outcome.code == TOOL_ARGUMENTS_INVALID
        assert outcome.path.startswith("$")
    else:
        assert type(outcome) is dict
        assert outcome == arguments


@PROPERTY_SETTINGS
@given(st.text(alphabet=st.characters(codec=None), min_size=1))
def test_any_nonempty_string_path_parses_to_an_equal_path_or_is_refused_as_not_canonical(path: str) -> None:
    outcome = parse_outcome(READ_FILE, {"path": path})

    if is_canonical(path):
        assert outcome == ReadFileParameters(path=path)
    else:
        assert isinstance(outcome, InvalidToolArgumentsError)
        assert "is not canonical" in outcome.message
        assert isinstance(outcome.__cause__, msgspec.ValidationError)


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(st.dictionaries(st.text(max_size=8), json_values, max_size=6))
def test_json_objects_within_the_limits_parse_for_echo_to_an_equal_object(
    arguments: dict[str, object],
) -> None:
    assert parse_tool_arguments(ECHO, arguments) == arguments


@dataclasses.dataclass
class Measure:
    deepest_container: int = 0
    longest_string: int = 0
    largest_container: int = 0
    nodes: int = 0


def measure(value: object, depth: int, into: Measure) -> None:
    """Record the sizes ``ArgumentLimits`` documents for a JSON ``value`` at ``depth``."""
    into.nodes += 1
    if isinstance(value, str):
        into.longest_string = max(into.longest_string, len(value))
    elif isinstance(value, list):
        items = cast(list[object], value)
        into.deepest_container = max(into.deepest_container, depth)
        into.largest_container = max(into.largest_container, len(items))
        for item in items:
            measure(item, depth + 1, into)
    elif isinstance(value, dict):
        fields = cast(dict[str, object], value)
        into.deepest_container = max(into.deepest_container, depth)
        into.largest_container = max(into.largest_container, len(fields))
        for key, item in fields.items():
            into.longest_string = max(into.longest_string, len(key))
            measure(item, depth + 1, into)


small_limits = st.builds(
    ArgumentLimits,
    max_depth=st.integers(min_value=0, max_value=4),
    max_string_length=st.integers(min_value=0, max_value=10),
    max_items=st.integers(min_value=0, max_value=5),
    max_nodes=st.integers(min_value=1, max_value=25),
)


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(st.dictionaries(st.text(max_size=12), json_values, max_size=6), small_limits)
def test_arguments_that_parse_are_within_every_limit(
    arguments: dict[str, object], limits: ArgumentLimits
) -> None:
    try:
        parse_tool_arguments(ECHO, arguments, limits=limits)
    except InvalidToolArgumentsError:
        return
    sizes = Measure()
    measure(arguments, 0, sizes)
    assert sizes.deepest_container <= limits.max_depth
    assert sizes.longest_string <= limits.max_string_length
    assert sizes.largest_container <= limits.max_items
    assert sizes.nodes <= limits.max_nodes
