"""The rules the allow-list brought (issue #15), form by form, with the repository's policy.

Every case analyses a snippet as a module of the kernel (``harness_kernel/_module.py`` under
``packages/kernel/src``) with the allow-list the repository's configuration gives that file,
and pins the rule, module, form, line and column of every finding. The second half is the
negative corpus: kernel-style code that must stay clean.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path
from typing import Final, NamedTuple

import pytest

from harness_import_boundary import check_paths, load_config
from harness_import_boundary._allow import AllowList
from harness_import_boundary._analysis import analyze_source
from harness_import_boundary._config import ExcludeMatcher
from harness_import_boundary._model import FilePolicy, parse_forbidden
from harness_import_boundary._syntax import DANGEROUS_BUILTINS, INTROSPECTION_ATTRIBUTES

REPOSITORY: Final = Path(__file__).resolve().parents[3]
KERNEL: Final = "packages/kernel/src"
EXIT_GATE: Final = "tools/exit-gate/src"


class Seen(NamedTuple):
    rule: str
    module: str
    form: str
    line: int
    column: int


def policy_for(relative: str, *, source: str = KERNEL) -> FilePolicy:
    """The policy the repository's configuration gives the file ``relative`` under ``source``."""
    config = load_config(REPOSITORY / "pyproject.toml")
    path = f"{source}/{relative}"
    extra = [
        entry
        for glob, entries in config.per_file_allow
        if ExcludeMatcher([glob]).matches(path)
        for entry in entries
    ]
    package = ".".join(relative.split("/")[:-1])
    return FilePolicy(parse_forbidden(config.forbidden), AllowList((*config.allow, *extra)), package)


MODULE_POLICY: Final = policy_for("harness_kernel/_module.py")


def findings(source: str, policy: FilePolicy = MODULE_POLICY) -> list[Seen]:
    raw = analyze_source(textwrap.dedent(source).encode(), policy)
    seen = [Seen(item.rule, item.module, item.form, item.line, item.column) for item in raw]
    return sorted(seen, key=lambda item: (item.line, item.column, item.rule, item.module, item.form))


def ib001(module: str, form: str, line: int, column: int) -> Seen:
    return Seen("IB001", module, form, line, column)


def ib002(form: str, line: int, column: int, module: str = "") -> Seen:
    return Seen("IB002", module, form, line, column)


def fullwidth(text: str) -> str:
    """``text`` with its ASCII letters and digits made fullwidth (NFKC folds them back)."""
    return "".join(chr(ord(character) + 0xFEE0) if character.isalnum() else character for character in text)


def case(source: str, *expected: Seen, id: str) -> object:
    return pytest.param(source, list(expected), id=id)


NOT_ALLOWED_CASES = [
    case("import sqlite3\n", ib001("sqlite3", "import", 1, 8), id="a module not on the list"),
    case("import json.tool\n", ib001("json.tool", "import", 1, 8), id="a submodule of an allowed module"),
    case(
        "from json import tool\n", ib001("json.tool", "from-import", 1, 18), id="a submodule imported by name"
    ),
    case("from pathlib import Path\n", ib001("pathlib.Path", "from-import", 1, 21), id="an impure class"),
    case(
        "from pathlib import PurePosixPath, Path\n",
        ib001("pathlib.Path", "from-import", 1, 36),
        id="a pure class beside an impure one",
    ),
    case(
        "import trio\ntrio.open_nursery\ntrio.lowlevel.open_process\n",
        ib001("trio.lowlevel.open_process", "attribute", 3, 15),
        id="trio's process API beside its nursery",
    ),
    case("import typing\ntyping.sys.modules\n", ib001("typing.sys", "attribute", 2, 8), id="typing.sys"),
    case("from typing import sys\n", ib001("typing.sys", "from-import", 1, 20), id="from typing import sys"),
    case("import random\nrandom._inst\n", ib001("random._inst", "attribute", 2, 8), id="a private name"),
    case(
        "from harness_workspace.local import LocalWorkspace\n",
        ib001("harness_workspace.local.LocalWorkspace", "from-import", 1, 37),
        id="the workspace adapter",
    ),
    case(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import sqlite3\n",
        ib001("sqlite3", "import:type-checking", 3, 12),
        id="a type-only import names no more",
    ),
    case(f"import {fullwidth('sqlite3')}\n", ib001("sqlite3", "import", 1, 8), id="a fullwidth module name"),
    case(
        "__import__('sqlite3')\n",
        ib001("sqlite3", "dunder-import", 1, 1),
        id="__import__ of a refused module",
    ),
    case(
        "__import__('json')\n",
        ib002("module-value", 1, 1, module="json"),
        id="__import__ of an allowed module returns it as a value",
    ),
    case("__import__('.x')\n", ib002("dynamic-import", 1, 1), id="__import__ of a relative name"),
    case(
        "from trio import *\n",
        ib001("trio", "from-import", 1, 6),
        id="a star import of a partly allowed module",
    ),
    case(
        "from re import *\n", ib002("star-import", 1, 6, module="re"), id="a star import of an allowed module"
    ),
]

MODULE_VALUE_CASES = [
    case("import re\npatterns = [re]\n", ib002("module-value", 2, 13, module="re"), id="a module in a list"),
    case("import re\nm = re\n", ib002("module-value", 2, 5, module="re"), id="a module bound to a name"),
    case(
        "import trio\nt = trio\n",
        ib002("module-value", 2, 5, module="trio"),
        id="a namespace bound to a name",
    ),
    case(
        "from trio import lowlevel\nl = lowlevel\n",
        ib002("module-value", 2, 5, module="trio.lowlevel"),
        id="a from-imported namespace bound to a name",
    ),
    case(
        "import trio\nscope = trio.lowlevel\n",
        ib002("module-value", 2, 14, module="trio.lowlevel"),
        id="a namespace reached as an attribute",
    ),
    case(
        "import trio as t\n",
        ib002("module-value", 1, 8, module="trio"),
        id="a namespace imported under another name",
    ),
    case(
        "from trio import lowlevel as l\n",
        ib002("module-value", 1, 18, module="trio.lowlevel"),
        id="a namespace from-imported under another name",
    ),
    case(
        "import json\nsetattr(json, 'loads', f)\n",
        ib002("module-value", 2, 9, module="json"),
        id="a module passed to setattr",
    ),
]

RELATIVE_CASES = [
    case("from .. import evil\n", ib002("relative-import", 1, 7), id="above the top package"),
    case("from ...x import y\n", ib002("relative-import", 1, 9), id="far above the top package"),
]

MUTATION_CASES = [
    case(
        "import json\njson.dumps = f\n", ib002("module-mutation", 2, 6, module="json.dumps"), id="assignment"
    ),
    case(
        "import json\njson.x += 1\n",
        ib002("module-mutation", 2, 6, module="json.x"),
        id="augmented assignment",
    ),
    case("import json\ndel json.x\n", ib002("module-mutation", 2, 10, module="json.x"), id="deletion"),
    case(
        "import typing\ntyping.TYPE_CHECKING: bool = True\n",
        ib002("module-mutation", 2, 8, module="typing.TYPE_CHECKING"),
        id="annotated assignment",
    ),
    case(
        "import json\nfor json.x in items:\n    pass\n",
        ib002("module-mutation", 2, 10, module="json.x"),
        id="a for target",
    ),
    case(
        "from harness_workspace import Workspace\nWorkspace.read_file = f\n",
        ib002("module-mutation", 2, 11, module="harness_workspace.Workspace.read_file"),
        id="an imported class",
    ),
]

DYNAMIC_ATTRIBUTE_CASES = [
    case("getattr(x, name)\n", ib002("dynamic-attribute", 1, 1), id="getattr with a computed name"),
    case("setattr(x, name, 1)\n", ib002("dynamic-attribute", 1, 1), id="setattr with a computed name"),
    case("delattr(x, name)\n", ib002("dynamic-attribute", 1, 1), id="delattr with a computed name"),
    case("read = getattr\n", ib002("dynamic-attribute", 1, 8), id="getattr used as a value"),
    case("getattr(*pair)\n", ib002("dynamic-attribute", 1, 1), id="getattr with star arguments"),
    case("getattr(x, '__globals__')\n", ib002("introspection", 1, 1), id="getattr with a dangerous name"),
    case("x.__getattribute__(name)\n", ib002("dynamic-attribute", 1, 3), id="__getattribute__ computed"),
    case(
        "object.__getattribute__(x, '__self__')\n",
        ib002("introspection", 1, 8),
        id="__getattribute__ with a dangerous name",
    ),
    case("hook = x.__getattr__\n", ib002("dynamic-attribute", 1, 10), id="__getattr__ taken"),
    case("x.__dict__[name]\n", ib002("dynamic-attribute", 1, 3), id="a __dict__ lookup with a computed key"),
    case("namespace = x.__dict__\n", ib002("dynamic-attribute", 1, 15), id="a __dict__ held as a value"),
    case(
        "def state(self):\n    return self.__dict__\n",
        ib002("dynamic-attribute", 2, 17),
        id="an instance __dict__ returned (a method can be called with a class)",
    ),
    case("getattr(x, '__dict__')\n", ib002("dynamic-attribute", 1, 1), id="a __dict__ read by name"),
    case(
        "found = d['__subclasses__']\n",
        ib002("introspection", 1, 11),
        id="a namespace lookup by a dangerous key",
    ),
    case(
        "found = d.get('__builtins__')\n",
        ib002("introspection", 1, 15),
        id="a namespace get by a dangerous key",
    ),
    case(
        "import msgspec\nclass View(msgspec.Struct):\n    __self__: object\n",
        ib002("introspection", 3, 5),
        id="a field named as a dangerous attribute",
    ),
    case(
        "import msgspec\nview = msgspec.convert(obj, View, from_attributes=True)\n",
        ib002("dynamic-attribute", 2, 16),
        id="msgspec.convert from attributes",
    ),
    case(
        "import msgspec\nconvert = msgspec.convert\n",
        ib002("dynamic-attribute", 2, 19),
        id="msgspec.convert used as a value",
    ),
    case("x.__dict__.get(name)\n", ib002("dynamic-attribute", 1, 3), id="a __dict__ get with a computed key"),
    case(
        "x.__dict__['__code__']\n", ib002("introspection", 1, 3), id="a __dict__ lookup of a dangerous name"
    ),
    case(
        "import json\nnamespace = json.__dict__\n",
        ib002("dynamic-attribute", 2, 18),
        id="the __dict__ of a module",
    ),
    case("namespace = type.__dict__\n", ib002("dynamic-attribute", 1, 18), id="the __dict__ of a builtin"),
    case(
        "import operator\noperator.attrgetter(name)\n",
        ib002("dynamic-attribute", 2, 10),
        id="attrgetter with a computed name",
    ),
    case(
        "import operator\noperator.attrgetter('a.__self__')\n",
        ib002("introspection", 2, 10),
        id="attrgetter with a dangerous dotted name",
    ),
    case(
        "from operator import methodcaller\nmethodcaller('__subclasses__')\n",
        ib002("introspection", 2, 1),
        id="methodcaller with a dangerous name",
    ),
    case(
        "import operator\nmake = operator.attrgetter\n",
        ib002("dynamic-attribute", 2, 17),
        id="attrgetter used as a value",
    ),
    case(f"{fullwidth('getattr')}(x, name)\n", ib002("dynamic-attribute", 1, 1), id="a fullwidth getattr"),
]


STRING_ANNOTATION_CASES = [
    case(
        'class Payload:\n    x: "exec(code) or int"\n',
        ib002("exec", 2, 8),
        id="a string annotation is code, placed at the string",
    ),
    case('def f(a: "open") -> "int": ...\n', ib001("builtins.open", "builtin-open", 1, 10), id="a parameter"),
    case('def f() -> "vars": ...\n', ib002("dangerous-builtin", 1, 12), id="a return annotation"),
    case(
        'HIDDEN = "open"\nclass Payload:\n    x: HIDDEN\n',
        ib001("builtins.open", "builtin-open", 1, 10),
        id="a string bound to a name used as an annotation",
    ),
    case("x: \"list['eval']\"\n", ib002("eval", 1, 4), id="a string inside a string"),
    case('x: "(y for y in ()).gi_frame"\n', ib002("introspection", 1, 4), id="any expression"),
    case(
        'import typing\nx: "typing.sys"\n',
        ib001("typing.sys", "attribute", 2, 4),
        id="the allow-list inside the string",
    ),
    case('x: "\\u0065xec"\n', ib002("exec", 1, 4), id="escapes are decoded first"),
    case(f'x: "{"int | " * 2000}int"\n', ib002("string-annotation", 1, 4), id="a string too long to parse"),
    case(
        "import typing\nRow = typing.NamedTuple('Row', [('x', 'exec')])\n",
        ib002("exec", 2, 39),
        id="the string field type of a NamedTuple",
    ),
    case(
        "import dataclasses\nRow = dataclasses.make_dataclass('Row', fields)\n",
        ib002("dynamic-type", 2, 7),
        id="a type built from a variable",
    ),
    case(
        "import msgspec\nRow = msgspec.defstruct('Row', [('x', int)], bases=make())\n",
        ib002("dynamic-type", 2, 7),
        id="a type built with a computed keyword",
    ),
    case(
        "Row = type('Row', (object,), {'__annotations__': {'x': 'vars'}})\n",
        ib002("dangerous-builtin", 1, 56),
        id="a class built by type",
    ),
    case(
        "Row = type('Row', *parts)\n",
        ib002("dynamic-type", 1, 7),
        id="type with star arguments",
    ),
]


@pytest.mark.parametrize(
    ("source", "expected"),
    NOT_ALLOWED_CASES
    + MODULE_VALUE_CASES
    + RELATIVE_CASES
    + MUTATION_CASES
    + DYNAMIC_ATTRIBUTE_CASES
    + STRING_ANNOTATION_CASES,
)
def test_the_allow_list_rules_report_each_form(source: str, expected: list[Seen]) -> None:
    assert findings(source) == expected


def test_a_refused_import_is_reported_once_and_not_again_at_its_uses() -> None:
    source = "import sqlite3\nsqlite3.connect('x')\nconnection = sqlite3\n"

    assert findings(source) == [ib001("sqlite3", "import", 1, 8)]


def test_the_uses_of_a_refused_import_still_get_the_deny_rules() -> None:
    source = "import builtins\nbuiltins.open('x')\nimport sys\nsys.modules['os']\n"

    assert findings(source) == [
        ib001("builtins", "import", 1, 8),
        ib001("builtins.open", "builtin-open", 2, 10),
        ib001("sys", "import", 3, 8),
        ib001("os", "sys-modules", 4, 5),
    ]


def test_the_message_names_the_allow_list() -> None:
    raw = analyze_source(b"import sqlite3\n", MODULE_POLICY)

    assert [item.message for item in raw] == ['"sqlite3" is not on the import allow-list']


@pytest.mark.parametrize("name", sorted(DANGEROUS_BUILTINS))
def test_every_reference_to_a_dangerous_builtin_is_unverifiable(name: str) -> None:
    assert findings(f"handle = {name}\n") == [ib002("dangerous-builtin", 1, 10)]


@pytest.mark.parametrize("name", ["exec", "eval"])
def test_exec_and_eval_are_unverifiable_as_values_too(name: str) -> None:
    assert findings(f"runner = {name}\n@{name}\ndef f(): ...\n") == [ib002(name, 1, 10), ib002(name, 2, 2)]


def test_findings_keep_their_positions_where_the_statements_cannot_be_matched_line_by_line() -> None:
    source = "import sqlite3\n@(\n    exec\n)\ndef f():\n    return vars\nx = y.__self__\n"

    assert findings(source) == [
        ib001("sqlite3", "import", 1, 8),
        ib002("exec", 3, 5),
        ib002("dangerous-builtin", 6, 12),
        ib002("introspection", 7, 7),
    ]


@pytest.mark.parametrize("name", sorted(INTROSPECTION_ATTRIBUTES))
def test_every_introspection_attribute_is_unverifiable_on_any_receiver(name: str) -> None:
    assert findings(f"value = anything.{name}\n") == [ib002("introspection", 1, 18)]


@pytest.mark.parametrize("name", sorted(INTROSPECTION_ATTRIBUTES))
def test_an_introspection_name_imported_from_a_module_is_unverifiable(name: str) -> None:
    assert findings(f"from harness_kernel.events import {name}\n") == [ib002("introspection", 1, 35)]


def test_the_store_files_may_use_sqlite3_and_the_thread_hop_and_the_others_may_not() -> None:
    source = "import sqlite3\nimport trio\nrun = trio.to_thread.run_sync\n"
    store = policy_for("harness_kernel/store/_sqlite.py")
    schema = policy_for("harness_kernel/store/_schema.py")
    threaded = policy_for("harness_kernel/store/_threaded.py")

    # The SQLite files may name sqlite3; only the threads' open/close life may hop to a thread.
    assert findings(source, store) == [ib001("trio.to_thread", "attribute", 3, 12)]
    assert findings(source, schema) == [ib001("trio.to_thread", "attribute", 3, 12)]
    assert findings(source, threaded) == [ib001("sqlite3", "import", 1, 8)]
    assert findings(source) == [
        ib001("sqlite3", "import", 1, 8),
        ib001("trio.to_thread", "attribute", 3, 12),
    ]


@pytest.mark.parametrize(
    "source",
    [
        "from harness_kernel.store import SqliteSessionStore\n",
        "from harness_kernel.store._sqlite import SqliteSessionStore\n",
        "from harness_kernel import store\nopened = store.SqliteSessionStore(':memory:')\n",
        "from harness_kernel import store\nopened = getattr(store, 'SqliteSessionStore')\n",
        "import harness_kernel.store\nopened = harness_kernel.store.SqliteSessionStore\n",
        "from harness_kernel.store._schema import connect_store\n",
        "from harness_kernel.store._worker import ConnectionThread\n",
        "from harness_kernel.store._threaded import ThreadedStore\n",
    ],
)
def test_the_stores_host_adapter_is_named_only_inside_the_store_package(tmp_path: Path, source: str) -> None:
    config = dataclasses.replace(load_config(REPOSITORY / "pyproject.toml"), root=tmp_path, jobs=1)
    for relative in ("harness_kernel/runtime/_wiring.py", "harness_kernel/store/_wiring.py"):
        location = tmp_path / KERNEL / relative
        location.parent.mkdir(parents=True, exist_ok=True)
        location.write_text(source, encoding="utf-8")

    findings = check_paths([], config)

    refused = {finding.path.rsplit("/", 2)[-2] for finding in findings if finding.rule == "IB001"}
    assert refused == {"runtime"}, findings
    assert all("is not on the import allow-list" in finding.message for finding in findings)


def test_tools_code_may_not_import_the_kernel() -> None:
    tools = FilePolicy(
        MODULE_POLICY.forbidden, AllowList(load_config(REPOSITORY / "pyproject.toml").allow), "x"
    )

    assert findings("from harness_kernel import run_agent\n", tools) == [
        ib001("harness_kernel.run_agent", "from-import", 1, 28)
    ]


# ----------------------------------------------------------------------------- the negative corpus

CLEAN_KERNEL_CODE = [
    pytest.param(
        """\
        from __future__ import annotations

        import dataclasses
        import json
        import math
        import re
        import uuid
        from collections.abc import Callable, Mapping
        from datetime import UTC, datetime
        from types import MappingProxyType
        from typing import TYPE_CHECKING, Final, Protocol

        import msgspec
        import trio

        from harness_kernel._json import FrozenDict, encode_json
        from harness_tools import Tool, ToolRegistry
        from harness_workspace import AbortSignal, Workspace

        if TYPE_CHECKING:
            from harness_kernel.events import Event

        _ID: Final = re.compile(r"[a-z]+")
        """,
        id="the imports of a kernel module",
    ),
    pytest.param(
        """\
        import msgspec

        class Record(msgspec.Struct, frozen=True, kw_only=True):
            name: str

        def encode(record: Record) -> bytes:
            return msgspec.json.encode(record)

        def names(record: Record) -> tuple[str, ...]:
            return tuple(info.name for info in msgspec.structs.fields(record))
        """,
        id="msgspec records",
    ),
    pytest.param(
        """\
        import math
        import trio

        async def run(deadline: float) -> None:
            with trio.CancelScope(deadline=deadline) as scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(trio.sleep, math.inf)
                    await trio.lowlevel.checkpoint()
                scope.cancel()
            send, receive = trio.open_memory_channel[int](0)
            event = trio.Event()
            lock = trio.Lock()
            started = trio.current_time()
        """,
        id="trio without I/O",
    ),
    pytest.param(
        """\
        import inspect

        def close(value: object) -> None:
            if inspect.iscoroutine(value):
                value.close()

        async def settle(value: object) -> object:
            return await value if inspect.isawaitable(value) else value
        """,
        id="inspect's predicates",
    ),
    pytest.param(
        """\
        class KernelError(Exception):
            def __init__(self, code: str) -> None:
                super().__init__(code)
                self.code = code

            def __reduce__(self):
                return (type(self), (self.code,))

        def describe(error: BaseException) -> str:
            code = getattr(error, "code", None)
            if hasattr(error, "retryable") and "code" in type(error).__dict__:
                return str(code)
            if "code" not in error.__dict__:
                return ""
            return type(error).__qualname__ + str([klass.__name__ for klass in type(error).__mro__])
        """,
        id="errors read by constant names",
    ),
    pytest.param(
        """\
        import operator
        import functools

        by_name = operator.attrgetter("name", "meta.kind")
        call = operator.methodcaller("close")
        total = functools.reduce(operator.add, [1, 2])
        """,
        id="operator getters with plain names",
    ),
    pytest.param(
        """\
        from pathlib import PurePath, PurePosixPath

        def relative(path: str | PurePath) -> str:
            return PurePosixPath(path).relative_to("/").as_posix()
        """,
        id="pure path arithmetic",
    ),
    pytest.param(
        """\
        from . import _json
        from ._json import FrozenDict
        from .events import Event
        """,
        id="relative imports inside the package",
    ),
    pytest.param(
        """\
        import datetime
        import importlib.metadata
        import uuid

        stamp = datetime.datetime.now(datetime.UTC).isoformat()
        identifier = uuid.uuid4().hex
        version = importlib.metadata.version("harness-kernel")
        """,
        id="clocks, ids and the distribution version",
    ),
    pytest.param(
        f"{fullwidth('count')} = 1\nprint({fullwidth('count')}, count)\n",
        id="a fullwidth local name",
    ),
]


CLEAN_KERNEL_CODE.append(
    pytest.param(
        """\
        import typing
        from typing import Annotated, Literal

        import msgspec

        Kind = Literal["open", "exec", "__import__('os')"]

        class Payload(msgspec.Struct):
            kind: Literal["open", "vars"]
            count: Annotated[int, "exec is only metadata"]
            later: "Payload | None" = None
            items: "list[int]" = []

        Row = typing.NamedTuple("Row", [("x", int), ("y", "list[str]")])
        T = typing.TypeVar("T", bound=Payload)
        kind = type(Payload)
        broken: "not (python"
        """,
        id="annotations that are values, metadata or plain types",
    )
)


CLEAN_KERNEL_CODE.append(
    pytest.param(
        """\
        import msgspec

        class Payload(msgspec.Struct, rename="camel"):
            tool_name: str

        decoded = msgspec.convert({"toolName": "x"}, Payload)
        same = msgspec.convert(decoded, Payload, from_attributes=False)
        record = {"name": "x"}
        print(record["name"], record.get("kind"))
        """,
        id="msgspec conversions from plain data",
    )
)


CLEAN_KERNEL_CODE.append(
    pytest.param(
        """\
        from __future__ import annotations

        from collections.abc import Mapping
        from typing import TypeAlias

        Pair: TypeAlias = tuple[str, "Box | None"]

        class Box(Mapping[str, "Box"]):
            __slots__ = ("_items",)

            def __init__(self, items: dict[str, Box]) -> None:
                super().__init__()
                self._items = items
                self._count = len(items)

            def __eq__(self, other: object) -> bool:
                return isinstance(other, Box) and self._items == other._items

            @classmethod
            def empty(cls) -> Box:
                return cls.__new__(cls)

        def size(box: Box) -> int:
            return len(box._items)

        def same(value: object) -> bool:
            return type(value) is Box and bool(value._items)

        def describe(error: Exception) -> str:
            return f"{type(error).__name__}: {error.__cause__!r} in {Box.__module__}"
        """,
        id="private names of the module's own classes, and plain dunders",
    )
)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f(x):\n    return x._evaluate\n", [ib002("private-attribute", 2, 14)]),
        ("def f(x):\n    return x.__forward_arg__\n", [ib002("private-attribute", 2, 14)]),
        ("value = compute()._secret\n", [ib002("private-attribute", 1, 19)]),
        ("class A:\n    _x = 1\ndef f(v):\n    return v._x\n", [ib002("private-attribute", 4, 14)]),
        # a staticmethod's first parameter is not the instance
        (
            "class A:\n    @staticmethod\n    def f(v):\n        return v._x\n",
            [ib002("private-attribute", 4, 18)],
        ),
        # annotated with a class of the module that does not declare the name
        ("class A:\n    pass\ndef f(v: A):\n    return v._evaluate\n", [ib002("private-attribute", 4, 14)]),
        # a dunder is never vouched for by an annotation
        ("class A:\n    pass\ndef f(v: A):\n    return v.__args__\n", [ib002("private-attribute", 4, 14)]),
        # a chain below the method's receiver holds values of any type
        ("class A:\n    def f(self):\n        return self.x._y\n", [ib002("private-attribute", 3, 23)]),
        ("import operator\nget = operator.attrgetter('_evaluate')\n", [ib002("private-attribute", 2, 16)]),
        ("def f(x):\n    return getattr(x, '__forward_code__')\n", [ib002("private-attribute", 2, 12)]),
    ],
)
def test_private_and_dunder_attributes_need_a_receiver_known_to_be_the_modules_own(
    source: str, expected: list[Seen]
) -> None:
    assert findings(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import typing\nAlias = typing.List['x']\n", [ib002("forward-reference", 2, 21)]),
        ("from typing import Optional\nAlias = Optional['x']\n", [ib002("forward-reference", 2, 18)]),
        ("import collections.abc\nA = collections.abc.Sequence['x']\n", [ib002("forward-reference", 2, 30)]),
        ("Alias = list['x']\n", [ib002("forward-reference", 1, 14)]),
        ("import typing\nA = typing.Callable[['x'], int]\n", [ib002("forward-reference", 2, 22)]),
        ("import typing\nName = 'x'\nA = typing.List[Name]\n", [ib002("forward-reference", 3, 17)]),
        ("import typing\nA = typing.List.__getitem__('x')\n", [ib002("forward-reference", 2, 29)]),
        # values, not types: never forward references
        ("import typing\nA = typing.Literal['x']\nB = typing.Annotated[int, 'note']\n", []),
        ("table = {'x': 1}\nvalue = table['x']\n", []),
    ],
)
def test_strings_in_typing_subscripts_outside_annotations_are_forward_references(
    source: str, expected: list[Seen]
) -> None:
    assert findings(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (
            "import msgspec\nimport typing\nH = typing.List['__import__(\"os\").getcwd()']\n"
            "class S(msgspec.Struct):\n    x: H\n",
            ib001("os", "dunder-import", 3, 17),
        ),
        (
            "import msgspec\nH = 'open(' + '\"x\")'\nclass S(msgspec.Struct):\n    x: H\n",
            ib002("string-annotation", 2, 5),
        ),
    ],
)
def test_a_type_alias_is_checked_as_code_where_an_annotation_uses_it(source: str, expected: Seen) -> None:
    assert expected in findings(source)


@pytest.mark.parametrize("source", CLEAN_KERNEL_CODE)
def test_kernel_style_code_stays_clean(source: str) -> None:
    assert findings(source) == []


def test_the_store_and_the_yaml_reader_stay_clean_in_their_own_files() -> None:
    store = (
        "import sqlite3\nfrom pathlib import PurePath\n\nconnection = sqlite3.connect(str(PurePath('a')))\n"
    )
    threads = "import trio\n\nasync def go(f):\n    await trio.to_thread.run_sync(f)\n"
    reader = "import yaml\n\nfor event in yaml.parse('a: 1', Loader=yaml.SafeLoader):\n    pass\n"

    assert findings(store, policy_for("harness_kernel/store/_sqlite.py")) == []
    assert findings(threads, policy_for("harness_kernel/store/_threaded.py")) == []
    assert findings(reader, policy_for("harness_exit_gate/manifest/_yaml.py", source=EXIT_GATE)) == []
