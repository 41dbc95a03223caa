"""Shared adapters, odd values and hypothesis strategies of the dispatcher's property tests.

Hypothesis generates malformed requests (wrong types at every level, subclasses, extra and
missing keys, bool for int, deep nesting, cycles, hostile keys) and adapter results of any
shape; the property tests assert that only typed ``WorkspaceOperationError``s escape.
"""

from __future__ import annotations

import collections
import types
from collections.abc import Callable, Mapping
from typing import Final, TypeVar, cast

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from workspace_dispatch_fixtures import (
    MAX_SAFE_INTEGER,
    IntSubclass,
    build_command_request,
)

from harness_workspace import (
    WORKSPACE_CAPABILITIES,
    AbortController,
    AbortSignal,
    CommandRequest,
    CommandResult,
    WorkspaceSnapshot,
)

MAX_ARRAY_LENGTH: Final = 100_000
MAX_DEPTH: Final = 64
VOCABULARY: Final = frozenset(WORKSPACE_CAPABILITIES)
ALLOWED_KEYS: Final[dict[str, frozenset[str]]] = {
    "read_file": frozenset({"operation", "path"}),
    "list_files": frozenset({"operation", "path"}),
    "write_file": frozenset({"operation", "path", "contents"}),
    "execute": frozenset({"operation", "command"}),
    "diff": frozenset({"operation"}),
    "snapshot": frozenset({"operation"}),
    "dispose": frozenset({"operation"}),
}
REQUIRED_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "read_file": ("path",),
    "list_files": ("path",),
    "write_file": ("path", "contents"),
    "execute": ("command",),
}
COMMAND_KEYS: Final = ("argv", "cwd", "timeout_ms", "signal")

Key = TypeVar("Key")

PROPERTY_SETTINGS = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


# ------------------------------------------------------------------ adapters


class RecordingWorkspace:
    """Records every call with its arguments and answers each operation with a valid result."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []

    async def read_file(self, path: str) -> str:
        self.calls.append(("read_file", (path,)))
        return "text"

    async def write_file(self, path: str, contents: str) -> None:
        self.calls.append(("write_file", (path, contents)))

    async def list_files(self, path: str) -> list[str]:
        self.calls.append(("list_files", (path,)))
        return ["a.txt"]

    async def execute(self, command: CommandRequest) -> CommandResult:
        self.calls.append(("execute", (command,)))
        return CommandResult(exit_code=0, stdout="", stderr="")

    async def diff(self) -> str:
        self.calls.append(("diff", ()))
        return ""

    async def snapshot(self) -> WorkspaceSnapshot:
        self.calls.append(("snapshot", ()))
        return WorkspaceSnapshot(id="s", created_at="t")

    async def dispose(self) -> None:
        self.calls.append(("dispose", ()))


class ScriptedWorkspace:
    """Answers every operation with one scripted value."""

    def __init__(self, answer: object) -> None:
        self.answer = answer

    async def read_file(self, path: str) -> object:
        return self.answer

    async def write_file(self, path: str, contents: str) -> object:
        return self.answer

    async def list_files(self, path: str) -> object:
        return self.answer

    async def execute(self, command: CommandRequest) -> object:
        return self.answer

    async def diff(self) -> object:
        return self.answer

    async def snapshot(self) -> object:
        return self.answer

    async def dispose(self) -> object:
        return self.answer


# ------------------------------------------------------------------ odd values


class StrSubclass(str):
    """A ``str`` subclass."""


class FloatSubclass(float):
    """A ``float`` subclass."""


class DictSubclass(dict[object, object]):
    """A ``dict`` subclass."""


class ListSubclass(list[object]):
    """A ``list`` subclass."""


class TupleSubclass(tuple[object, ...]):
    """A ``tuple`` subclass."""


class LookalikeSignal:
    """Quacks like an ``AbortSignal`` without being one."""

    aborted = False
    reason: object = None


class HostileKey:
    """A key that hashes like ``"operation"`` and, once armed, fails loudly if compared or hashed."""

    def __init__(self) -> None:
        self.armed = False

    def __hash__(self) -> int:
        if self.armed:
            raise AssertionError("caller code ran inside the dispatcher: __hash__")
        return hash("operation")

    def __eq__(self, other: object) -> bool:
        if self.armed:
            raise AssertionError("caller code ran inside the dispatcher: __eq__")
        return self is other


def ordered_dict(items: Mapping[object, object]) -> object:
    """An ``OrderedDict`` copy of ``items``."""
    return collections.OrderedDict(items)


def dict_subclass(items: Mapping[object, object]) -> object:
    """A ``dict`` subclass copy of ``items``."""
    return DictSubclass(items)


def defaultdict_copy(items: Mapping[object, object]) -> object:
    """A ``defaultdict`` copy of ``items``."""
    return collections.defaultdict[object, object](list, items)


def proxy_copy(items: Mapping[Key, object]) -> object:
    """A read-only proxy over a copy of ``items``."""
    return types.MappingProxyType(dict(items))


def nest(depth: int, leaf: object, *, in_dicts: bool) -> object:
    """Wrap ``leaf`` in ``depth`` one-element lists or one-key dicts."""
    value = leaf
    for _ in range(depth):
        value = {"k": value} if in_dicts else [value]
    return value


def self_containing_list() -> object:
    """A list that contains itself."""
    value: list[object] = [1]
    value.append(value)
    return value


def self_containing_dict() -> object:
    """A dict that contains itself."""
    value: dict[str, object] = {"argv": ["ls"]}
    value["self"] = value
    return value


def pending_signal() -> AbortSignal:
    """A genuine signal that has not been aborted."""
    return AbortController().signal


build_command_result = cast("Callable[..., CommandResult]", CommandResult)
build_snapshot = cast("Callable[..., WorkspaceSnapshot]", WorkspaceSnapshot)


# ------------------------------------------------------------------ strategies: values of any shape

odd_scalars: st.SearchStrategy[object] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=MAX_SAFE_INTEGER - 2, max_value=2**64),
    st.floats(),
    st.text(max_size=8),
    st.binary(max_size=4),
    st.builds(StrSubclass, st.text(max_size=4)),
    st.builds(IntSubclass, st.integers()),
    st.builds(FloatSubclass, st.floats(allow_nan=False)),
    st.builds(LookalikeSignal),
    st.builds(object),
    st.builds(bytearray, st.binary(max_size=4)),
    st.frozensets(st.integers(), max_size=2),
    st.sampled_from(
        [CommandResult(exit_code=0, stdout="", stderr=""), WorkspaceSnapshot(id="s", created_at="t")]
    ),
)

non_string_keys: st.SearchStrategy[object] = st.one_of(
    st.integers(),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False),
    st.binary(max_size=3),
    st.tuples(st.text(max_size=3)),
    st.builds(StrSubclass, st.sampled_from(["operation", "path", "argv", "exit_code", "id"])),
)

odd_keys: st.SearchStrategy[object] = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["operation", "path", "contents", "command", "argv", "cwd", "timeout_ms", "signal"]),
    non_string_keys,
)


def extend_containers(children: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """Containers of every kind the contract rejects or accepts, around ``children``."""
    mappings = st.dictionaries(odd_keys, children, max_size=3)
    return st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        mappings,
        st.lists(children, max_size=3).map(ListSubclass),
        st.lists(children, max_size=3).map(TupleSubclass),
        mappings.map(dict_subclass),
        mappings.map(ordered_dict),
        mappings.map(proxy_copy),
    )


anything: st.SearchStrategy[object] = st.recursive(odd_scalars, extend_containers, max_leaves=6)

deeply_nested: st.SearchStrategy[object] = st.builds(
    nest, st.integers(min_value=1, max_value=1_500), anything, in_dicts=st.booleans()
)

cyclic: st.SearchStrategy[object] = st.one_of(
    st.builds(self_containing_list), st.builds(self_containing_dict)
)

any_value: st.SearchStrategy[object] = st.one_of(anything, deeply_nested, cyclic)

non_dict_values: st.SearchStrategy[object] = st.one_of(
    odd_scalars,
    st.lists(anything, max_size=3),
    st.lists(anything, max_size=3).map(tuple),
    st.dictionaries(odd_keys, anything, max_size=3).map(dict_subclass),
    st.dictionaries(odd_keys, anything, max_size=3).map(ordered_dict),
    st.dictionaries(odd_keys, anything, max_size=3).map(proxy_copy),
    st.builds(nest, st.integers(min_value=1, max_value=1_500), anything, in_dicts=st.just(False)),
    st.builds(self_containing_list),
)


# ------------------------------------------------------------------ strategies: requests


def is_safe_integer(value: object) -> bool:
    return type(value) is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER


def is_valid_path(value: object) -> bool:
    return type(value) is str and value != ""


def is_valid_contents(value: object) -> bool:
    return type(value) is str


def is_valid_argv(value: object) -> bool:
    if type(value) is not list and type(value) is not tuple:
        return False
    items = cast("list[object] | tuple[object, ...]", value)
    if not 1 <= len(items) <= MAX_ARRAY_LENGTH:
        return False
    return is_valid_path(items[0]) and all(type(item) is str for item in items[1:])


def is_valid_cwd(value: object) -> bool:
    return value is None or is_valid_path(value)


def is_valid_timeout(value: object) -> bool:
    return value is None or (type(value) is int and 0 <= value <= MAX_SAFE_INTEGER)


def is_valid_signal(value: object) -> bool:
    return value is None or type(value) is AbortSignal


COMMAND_FIELD_CHECKS: Final[dict[str, Callable[[object], bool]]] = {
    "argv": is_valid_argv,
    "cwd": is_valid_cwd,
    "timeout_ms": is_valid_timeout,
    "signal": is_valid_signal,
}


def argv_with_a_bad_argument(items: tuple[str, list[str], object, int]) -> object:
    """A valid argv with one argument after the program replaced by a non-string."""
    program, arguments, bad, position = items
    rest: list[object] = list(arguments)
    rest.insert(position % (len(rest) + 1), bad)
    return [program, *rest]


def program_then_arguments(items: tuple[object, list[str]]) -> object:
    """An argv list from a (possibly invalid) program and its arguments."""
    program, arguments = items
    return [program, *arguments]


INVALID_COMMAND_FIELDS: Final[dict[str, st.SearchStrategy[object]]] = {
    "argv": st.one_of(
        st.sampled_from([[], (), [""], "ls -l", b"ls", None, {"0": "ls"}, ["ls", 1], ["ls", "-l", None]]),
        st.builds(ListSubclass, st.lists(st.text(min_size=1, max_size=3), min_size=1, max_size=3)),
        st.builds(TupleSubclass, st.lists(st.text(min_size=1, max_size=3), min_size=1, max_size=3)),
        st.tuples(
            st.one_of(
                st.just(""),
                st.builds(StrSubclass, st.text(min_size=1, max_size=3)),
                odd_scalars.filter(lambda value: type(value) is not str),
            ),
            st.lists(st.text(max_size=3), max_size=3),
        ).map(program_then_arguments),
        st.tuples(
            st.text(min_size=1, max_size=4),
            st.lists(st.text(max_size=3), max_size=3),
            odd_scalars.filter(lambda value: type(value) is not str),
            st.integers(0, 5),
        ).map(argv_with_a_bad_argument),
    ),
    "cwd": st.one_of(
        st.just(""),
        st.builds(StrSubclass, st.text(min_size=1, max_size=3)),
        odd_scalars.filter(lambda value: value is not None and type(value) is not str),
    ),
    "timeout_ms": st.one_of(
        st.booleans(),
        st.integers(max_value=-1),
        st.integers(min_value=MAX_SAFE_INTEGER + 1),
        st.floats(),
        st.builds(IntSubclass, st.integers(0, 1_000)),
        st.sampled_from(["5", 5.0, 0.0]),
    ),
    "signal": st.one_of(
        st.builds(LookalikeSignal),
        st.builds(AbortController),
        st.sampled_from(["signal", True, 0, AbortSignal]),
        odd_scalars.filter(lambda value: value is not None),
    ),
}


genuine_signals: st.SearchStrategy[AbortSignal] = st.one_of(
    st.builds(pending_signal), st.builds(AbortSignal.aborted_with, st.text(max_size=4))
)


@st.composite
def valid_command_fields(draw: st.DrawFn) -> dict[str, object]:
    """The fields of a well-formed command (optional ones present or absent, ``None`` or set)."""
    argv = [draw(st.text(min_size=1, max_size=6)), *draw(st.lists(st.text(max_size=6), max_size=4))]
    fields: dict[str, object] = {"argv": tuple(argv) if draw(st.booleans()) else argv}
    if draw(st.booleans()):
        fields["cwd"] = draw(st.one_of(st.none(), st.text(min_size=1, max_size=6)))
    if draw(st.booleans()):
        fields["timeout_ms"] = draw(
            st.one_of(st.none(), st.integers(0, 60_000), st.integers(0, MAX_SAFE_INTEGER))
        )
    if draw(st.booleans()):
        fields["signal"] = draw(st.one_of(st.none(), genuine_signals))
    return fields


def command_in_form(fields: dict[str, object], as_struct: bool) -> object:
    """The command as a plain dict or as an exact ``CommandRequest``."""
    return build_command_request(**fields) if as_struct else dict(fields)


@st.composite
def valid_requests(draw: st.DrawFn) -> dict[str, object]:
    """A well-formed request for any of the seven operations."""
    operation = draw(st.sampled_from(WORKSPACE_CAPABILITIES))
    request: dict[str, object] = {"operation": operation}
    if operation in ("read_file", "list_files", "write_file"):
        request["path"] = draw(st.text(min_size=1, max_size=10))
    if operation == "write_file":
        request["contents"] = draw(st.text(max_size=10))
    if operation == "execute":
        request["command"] = command_in_form(draw(valid_command_fields()), draw(st.booleans()))
    return request


@st.composite
def malformed_commands(draw: st.DrawFn) -> object:
    """A command that breaks exactly one rule of §3.7 (and possibly more)."""
    fields = draw(valid_command_fields())
    mutation = draw(
        st.sampled_from(["field", "field", "field", "bool-for-int", "extra-key", "non-str-key", "container"])
    )
    if mutation == "field":
        key = draw(st.sampled_from(COMMAND_KEYS))
        check = COMMAND_FIELD_CHECKS[key]
        candidates = any_value if draw(st.integers(0, 3)) == 0 else INVALID_COMMAND_FIELDS[key]
        fields[key] = draw(candidates.filter(lambda value: not check(value)))
        return command_in_form(fields, draw(st.booleans()))
    if mutation == "bool-for-int":
        fields["timeout_ms"] = draw(st.booleans())
        return command_in_form(fields, draw(st.booleans()))
    if mutation == "extra-key":
        extra = draw(st.text(max_size=8).filter(lambda key: key not in COMMAND_KEYS))
        return {**fields, extra: draw(any_value)}
    if mutation == "non-str-key":
        return {**fields, draw(non_string_keys): draw(any_value)}
    wrap = draw(st.sampled_from([ordered_dict, dict_subclass, defaultdict_copy, proxy_copy]))
    return wrap(cast("dict[object, object]", fields))


def is_valid_field(key: str, value: object) -> bool:
    if key == "path":
        return is_valid_path(value)
    if key == "contents":
        return is_valid_contents(value)
    return type(value) is CommandRequest or type(value) is dict


@st.composite
def malformed_requests(draw: st.DrawFn) -> object:
    """A request that violates the envelope or a field rule of §3.6-3.7."""
    request = draw(valid_requests())
    operation = cast("str", request["operation"])
    fields = REQUIRED_FIELDS.get(operation, ())
    mutations = ["not-a-dict", "dict-subclass", "non-str-key", "hostile-key", "name", "extra-key", "cycle"]
    if fields:
        mutations += ["missing-field", "wrong-field", "deep-field"]
    if operation == "execute":
        mutations += ["bad-command"]
    mutation = draw(st.sampled_from(mutations))

    if mutation == "not-a-dict":
        return draw(non_dict_values)
    if mutation == "dict-subclass":
        wrap = draw(st.sampled_from([ordered_dict, dict_subclass, defaultdict_copy, proxy_copy]))
        return wrap(cast("dict[object, object]", request))
    if mutation == "non-str-key":
        return {**request, draw(non_string_keys): draw(any_value)}
    if mutation == "hostile-key":
        # The hostile key goes first, so any lookup of "operation" would have to compare it.
        hostile = HostileKey()
        with_hostile_key: dict[object, object] = {hostile: 1, **request}
        hostile.armed = True
        return with_hostile_key
    if mutation == "name":
        name = draw(
            st.one_of(
                any_value,
                st.sampled_from(["readFile", "writeFile", "listFiles", "READ_FILE", "Diff", "", None]),
            ).filter(lambda value: type(value) is not str or value not in VOCABULARY)
        )
        return {**request, "operation": name}
    if mutation == "extra-key":
        allowed = ALLOWED_KEYS[operation]
        extra = draw(
            st.one_of(st.text(max_size=8), st.sampled_from(["path", "command", "timeoutMs", "Path"])).filter(
                lambda key: key not in allowed
            )
        )
        return {**request, extra: draw(st.one_of(st.none(), any_value))}
    if mutation == "cycle":
        key = draw(st.sampled_from(fields)) if fields else "self"
        cyclic_request: dict[str, object] = dict(request)
        cyclic_request[key] = cyclic_request
        return cyclic_request
    if mutation == "missing-field":
        missing = draw(st.sampled_from(fields))
        return {key: value for key, value in request.items() if key != missing}
    if mutation == "wrong-field":
        key = draw(st.sampled_from(fields))
        candidates = non_dict_values if key == "command" else any_value
        value = draw(candidates.filter(lambda value: not is_valid_field(key, value)))
        return {**request, key: value}
    if mutation == "deep-field":
        key = draw(st.sampled_from(fields))
        return {**request, key: draw(deeply_nested)}
    return {**request, "command": draw(malformed_commands())}
