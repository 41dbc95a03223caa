"""What the per-file analysis reports, form by form (spec §3-§6).

Every row of the §4 table and every bullet of §3, §5 and §6 has cases here, each asserting
the rule, module, form, line and column of every finding, and a list of sources that must
produce nothing at all. The configured forbidden entries are the defaults plus two object
entries (``trio.run_process``, ``codecs.open``), as in the repository's own table.
"""

from __future__ import annotations

import textwrap
from typing import Final, NamedTuple

import pytest

from harness_import_boundary._analysis import analyze_source
from harness_import_boundary._model import DEFAULT_FORBIDDEN, FilePolicy, Forbidden, parse_forbidden

FORBIDDEN: Final = parse_forbidden([*DEFAULT_FORBIDDEN, "trio.run_process", "codecs.open"])


class Seen(NamedTuple):
    """A finding reduced to what these tests pin: rule, module, form and position."""

    rule: str
    module: str
    form: str
    line: int
    column: int


def ib001(module: str, form: str, line: int, column: int) -> Seen:
    return Seen("IB001", module, form, line, column)


def ib002(form: str, line: int, column: int, module: str = "") -> Seen:
    return Seen("IB002", module, form, line, column)


def findings(source: str, forbidden: Forbidden = FORBIDDEN) -> list[Seen]:
    """Analyse a dedented snippet with the forbidden entries alone; findings in source order.

    These cases pin the deny rules of the specification, so no allow-list applies here
    (``tests/test_allow_list.py`` covers it).
    """
    raw = analyze_source(textwrap.dedent(source).encode(), FilePolicy(forbidden, None, None))
    seen = [Seen(item.rule, item.module, item.form, item.line, item.column) for item in raw]
    return sorted(seen, key=lambda item: (item.line, item.column, item.rule, item.module))


def case(source: str, *expected: Seen, id: str) -> object:
    return pytest.param(source, list(expected), id=id)


# ----------------------------------------------------------------------------- §4 import forms

IMPORT_CASES = [
    case("import os\n", ib001("os", "import", 1, 8), id="import os"),
    case("import os.path as osp\n", ib001("os.path", "import", 1, 8), id="import os.path as osp"),
    case("import io as _io\n", ib001("io", "import", 1, 8), id="import io as _io"),
    case("import subprocess\n", ib001("subprocess", "import", 1, 8), id="import subprocess"),
    case("import shutil\n", ib001("shutil", "import", 1, 8), id="import shutil"),
    case(
        "import json, os, io\n",
        ib001("os", "import", 1, 14),
        ib001("io", "import", 1, 18),
        id="each name of a multi-name import",
    ),
    case(
        "import \\\n    shutil\n",
        ib001("shutil", "import", 2, 5),
        id="import continued on the next line is reported at the module name",
    ),
    case("from os import path\n", ib001("os.path", "from-import", 1, 16), id="from os import path"),
    case("from os.path import *\n", ib001("os.path", "from-import", 1, 6), id="from os.path import star"),
    case(
        "from shutil import rmtree as r\n",
        ib001("shutil.rmtree", "from-import", 1, 20),
        id="from shutil import rmtree as r",
    ),
    case(
        """\
        from subprocess import (
            run as execute,
            Popen,
        )
        """,
        ib001("subprocess.run", "from-import", 2, 5),
        ib001("subprocess.Popen", "from-import", 3, 5),
        id="each name of a parenthesized from-import",
    ),
    case(
        "from builtins import open as o\n",
        ib001("builtins.open", "from-import", 1, 22),
        id="from builtins import open",
    ),
]


@pytest.mark.parametrize(("source", "expected"), IMPORT_CASES)
def test_import_statements_report_the_imported_dotted_name(source: str, expected: list[Seen]) -> None:
    assert findings(source) == expected


IMPORT_MODULE_CASES = [
    case(
        'import importlib\nimportlib.import_module("os")\n',
        ib001("os", "import-module", 2, 11),
        id="importlib.import_module with a literal",
    ),
    case(
        'from importlib import import_module as f; f("subprocess")\n',
        ib001("subprocess", "import-module", 1, 43),
        id="import_module under an alias",
    ),
    case(
        'from importlib import import_module\nimport_module(name="io")\n',
        ib001("io", "import-module", 2, 1),
        id="import_module with the name as keyword",
    ),
    case(
        'import importlib as il\nil.import_module("shutil.rmtree")\n',
        ib001("shutil.rmtree", "import-module", 2, 4),
        id="import_module through an aliased importlib",
    ),
    case(
        'def load():\n    import importlib\n    return importlib.import_module("os.path")\n',
        ib001("os.path", "import-module", 3, 22),
        id="import_module inside a function",
    ),
]

DUNDER_IMPORT_CASES = [
    case('__import__("os")\n', ib001("os", "dunder-import", 1, 1), id="builtin __import__"),
    case(
        'import builtins\nbuiltins.__import__("os.path")\n',
        ib001("os.path", "dunder-import", 2, 10),
        id="builtins.__import__",
    ),
    case(
        'import importlib\nimportlib.__import__("io")\n',
        ib001("io", "dunder-import", 2, 11),
        id="importlib.__import__",
    ),
    case(
        'from builtins import __import__ as load\nload("subprocess")\n',
        ib001("subprocess", "dunder-import", 2, 1),
        id="__import__ under an alias",
    ),
    case(
        'loader = lambda: __import__("shutil")\n',
        ib001("shutil", "dunder-import", 1, 18),
        id="__import__ inside a lambda",
    ),
    case(
        '__import__("os", None, None, [], 0)\n',
        ib001("os", "dunder-import", 1, 1),
        id="__import__ with an absolute level",
    ),
]


@pytest.mark.parametrize(("source", "expected"), IMPORT_MODULE_CASES + DUNDER_IMPORT_CASES)
def test_loader_calls_with_a_static_name_report_the_module(source: str, expected: list[Seen]) -> None:
    assert findings(source) == expected


STATIC_NAME_CASES = [
    case('"os"', ib001("os", "import-module", 2, 11), id="a plain literal"),
    case("'o' \"s\"", ib001("os", "import-module", 2, 11), id="an implicit concatenation"),
    case('("io")', ib001("io", "import-module", 2, 11), id="a parenthesized literal"),
    case('(("o" "s"))', ib001("os", "import-module", 2, 11), id="a parenthesized concatenation"),
    case('f"shutil"', ib001("shutil", "import-module", 2, 11), id="an f-string without placeholders"),
    case('r"subprocess"', ib001("subprocess", "import-module", 2, 11), id="a raw string"),
    case('f"{base}.path"', ib002("dynamic-import", 2, 11), id="an f-string with a placeholder"),
    case('"o" + "s"', ib002("dynamic-import", 2, 11), id="an explicit concatenation"),
    case("name", ib002("dynamic-import", 2, 11), id="a variable"),
    case('b"os"', ib002("dynamic-import", 2, 11), id="a bytes literal"),
    case("*names", ib002("dynamic-import", 2, 11), id="star arguments"),
    case("", ib002("dynamic-import", 2, 11), id="no argument"),
]


@pytest.mark.parametrize(("argument", "expected"), STATIC_NAME_CASES)
def test_a_loader_name_is_static_only_for_plain_literals(argument: str, expected: list[Seen]) -> None:
    assert findings(f"import importlib\nimportlib.import_module({argument})\n") == expected


# ----------------------------------------------------------------------------- §3 object entries

ATTRIBUTE_CASES = [
    case(
        'import trio\ntrio.run_process(["ls"])\n',
        ib001("trio.run_process", "attribute", 2, 6),
        id="configured attribute called through an allowed import",
    ),
    case(
        "import trio as t\nrunner = t.run_process\n",
        ib001("trio.run_process", "attribute", 2, 12),
        id="configured attribute referenced without a call",
    ),
    case(
        "import trio.lowlevel\ntrio.run_process\n",
        ib001("trio.run_process", "attribute", 2, 6),
        id="configured attribute reached through a submodule import",
    ),
    case(
        "import trio\ntrio.run_process.__doc__\n",
        ib001("trio.run_process", "attribute", 2, 6),
        id="configured attribute inside a longer chain",
    ),
    case(
        'import codecs\ncodecs.open("x")\ncodecs.encode("y")\n',
        ib001("codecs.open", "attribute", 2, 8),
        id="configured codecs.open beside an allowed codecs function",
    ),
    case(
        "from trio import run_process\n",
        ib001("trio.run_process", "from-import", 1, 18),
        id="configured object imported by name",
    ),
    case(
        'from trio import run_process as rp\nrp(["ls"])\n',
        ib001("trio.run_process", "from-import", 1, 18),
        id="configured object imported by alias is reported once at the import",
    ),
    case("import trio\ntrio.sleep(1)\n", id="other attributes of an allowed module"),
    case("import trio\ntrio.run_processes\n", id="an attribute that only shares the prefix"),
]


@pytest.mark.parametrize(("source", "expected"), ATTRIBUTE_CASES)
def test_configured_object_entries_match_attributes_of_allowed_imports(
    source: str, expected: list[Seen]
) -> None:
    assert findings(source) == expected


REPORTED_ONCE_CASES = [
    case(
        'import os\nos.path.join("a", "b")\nos.getcwd()\n',
        ib001("os", "import", 1, 8),
        id="import os then os.path.join",
    ),
    case(
        'import os.path\nos.path.exists("a")\nos.remove("b")\n',
        ib001("os.path", "import", 1, 8),
        id="import os.path then uses of os",
    ),
    case(
        'import subprocess as sp\nsp.run(["ls"])\n',
        ib001("subprocess", "import", 1, 8),
        id="aliased module then a call",
    ),
    case(
        'from os import path\npath.join("a")\n',
        ib001("os.path", "from-import", 1, 16),
        id="from-imported module then a call",
    ),
    case(
        'import runpy\nrunpy.run_path("script.py")\n',
        ib002("dynamic-loader", 1, 8, module="runpy"),
        id="dynamic loader module then a call",
    ),
]


@pytest.mark.parametrize(("source", "expected"), REPORTED_ONCE_CASES)
def test_each_binding_is_reported_once_where_authority_is_obtained(source: str, expected: list[Seen]) -> None:
    assert findings(source) == expected


def test_attributes_of_a_forbidden_import_are_not_reported_again() -> None:
    forbidden = parse_forbidden(["os", "os.system"])

    assert findings('import os\nos.system("ls")\n', forbidden) == [ib001("os", "import", 1, 8)]


def test_entries_match_only_whole_dotted_segments() -> None:
    forbidden = parse_forbidden(["os", "trio.run_process"])

    assert findings("import ossaudiodev\nimport trio\ntrio.run_process_group\n", forbidden) == []


# ----------------------------------------------------------------------------- sys.modules

SYS_MODULES_CASES = [
    case('import sys\nsys.modules["os"]\n', ib001("os", "sys-modules", 2, 5), id="subscript"),
    case('import sys\nsys.modules.get("io")\n', ib001("io", "sys-modules", 2, 5), id="get"),
    case(
        'import sys as s\ns.modules.get("shutil", None)\n',
        ib001("shutil", "sys-modules", 2, 3),
        id="get with a default through an aliased sys",
    ),
    case(
        'from sys import modules\nmodules["subprocess"]\n',
        ib001("subprocess", "sys-modules", 2, 1),
        id="subscript of from-imported modules",
    ),
    case(
        'import sys\nsys.modules["o" "s"]\n',
        ib001("os", "sys-modules", 2, 5),
        id="subscript with a concatenated key",
    ),
]


@pytest.mark.parametrize(("source", "expected"), SYS_MODULES_CASES)
def test_sys_modules_lookups_with_a_static_key_report_the_module(source: str, expected: list[Seen]) -> None:
    assert findings(source) == expected


# ----------------------------------------------------------------------------- builtin open

BUILTIN_OPEN_CASES = [
    case('open("x")\n', ib001("builtins.open", "builtin-open", 1, 1), id="a call"),
    case('open("x", "rb")\n', ib001("builtins.open", "builtin-open", 1, 1), id="a read-mode call"),
    case("f = open\n", ib001("builtins.open", "builtin-open", 1, 5), id="a reference"),
    case(
        'import builtins\nbuiltins.open("x")\n',
        ib001("builtins.open", "builtin-open", 2, 10),
        id="builtins.open",
    ),
    case(
        "import builtins as b\nhandle = b.open\n",
        ib001("builtins.open", "builtin-open", 2, 12),
        id="an aliased builtins.open",
    ),
    case(
        'import builtins\ngetattr(builtins, "open")\n',
        ib001("builtins.open", "builtin-open", 2, 1),
        id="getattr on builtins",
    ),
    case(
        "def read(path):\n    with open(path) as handle:\n        return handle.read()\n",
        ib001("builtins.open", "builtin-open", 2, 10),
        id="a call inside a function",
    ),
    case(
        "def copy(opener=open):\n    return opener\n",
        ib001("builtins.open", "builtin-open", 1, 17),
        id="a parameter default",
    ),
    case(
        "def copy(open=open):\n    return open\n",
        ib001("builtins.open", "builtin-open", 1, 15),
        id="a default evaluated outside the parameter that shadows it",
    ),
    case(
        "lines = [open(name) for name in names]\n",
        ib001("builtins.open", "builtin-open", 1, 10),
        id="a call inside a comprehension",
    ),
    case(
        "handler = (open)\n",
        ib001("builtins.open", "builtin-open", 1, 12),
        id="a parenthesized reference is reported at the name",
    ),
    case(
        "handler = (\n    open\n)\n",
        ib001("builtins.open", "builtin-open", 2, 5),
        id="a reference parenthesized over lines is reported on the line of the name",
    ),
]


@pytest.mark.parametrize(("source", "expected"), BUILTIN_OPEN_CASES)
def test_any_reference_to_builtin_open_is_reported(source: str, expected: list[Seen]) -> None:
    assert findings(source) == expected


# ----------------------------------------------------------------------------- TYPE_CHECKING

TYPE_CHECKING_CASES = [
    case(
        "import typing\nif typing.TYPE_CHECKING:\n    from os import PathLike\n",
        ib001("os.PathLike", "from-import:type-checking", 3, 20),
        id="typing.TYPE_CHECKING",
    ),
    case(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import os\n",
        ib001("os", "import:type-checking", 3, 12),
        id="from typing import TYPE_CHECKING",
    ),
    case(
        "import typing as t\nif t.TYPE_CHECKING:\n    import io\n",
        ib001("io", "import:type-checking", 3, 12),
        id="an aliased typing",
    ),
    case(
        "from typing import TYPE_CHECKING as TC\nif TC:\n    import shutil\n",
        ib001("shutil", "import:type-checking", 3, 12),
        id="an aliased TYPE_CHECKING",
    ),
    case(
        "import typing_extensions\nif typing_extensions.TYPE_CHECKING:\n    import subprocess\n",
        ib001("subprocess", "import:type-checking", 3, 12),
        id="typing_extensions.TYPE_CHECKING",
    ),
    case(
        "from typing_extensions import TYPE_CHECKING as checking\nif checking:\n"
        "    from io import StringIO\n",
        ib001("io.StringIO", "from-import:type-checking", 3, 20),
        id="an aliased typing_extensions TYPE_CHECKING",
    ),
    case(
        "import typing\ndef f():\n    if typing.TYPE_CHECKING:\n        import os\n",
        ib001("os", "import:type-checking", 4, 16),
        id="inside a function",
    ),
    case(
        "import typing\nif typing.TYPE_CHECKING:\n    if flag:\n        import os\n",
        ib001("os", "import:type-checking", 4, 16),
        id="nested in another conditional",
    ),
    case(
        "import typing\nif typing.TYPE_CHECKING:\n    import os\nelse:\n    import io\nimport shutil\n",
        ib001("os", "import:type-checking", 3, 12),
        ib001("io", "import", 5, 12),
        ib001("shutil", "import", 6, 8),
        id="the else branch and what follows are runtime imports",
    ),
    case(
        "from typing import TYPE_CHECKING\nif not TYPE_CHECKING:\n    import os\n",
        ib001("os", "import", 3, 12),
        id="a negated test is a runtime import",
    ),
    case(
        "TYPE_CHECKING = False\nif TYPE_CHECKING:\n    import os\n",
        ib001("os", "import", 3, 12),
        id="a local TYPE_CHECKING is not typing's",
    ),
]


@pytest.mark.parametrize(("source", "expected"), TYPE_CHECKING_CASES)
def test_type_checking_imports_are_reported_with_their_own_form(source: str, expected: list[Seen]) -> None:
    assert findings(source) == expected


# ----------------------------------------------------------------------------- where imports sit

NESTED_IMPORT_CASES = [
    case("def f():\n    import os\n", ib001("os", "import", 2, 12), id="in a function"),
    case("async def f():\n    import os\n", ib001("os", "import", 2, 12), id="in an async function"),
    case("class C:\n    import subprocess\n", ib001("subprocess", "import", 2, 12), id="in a class"),
    case(
        "class C:\n    def m(self):\n        from io import BytesIO\n",
        ib001("io.BytesIO", "from-import", 3, 24),
        id="in a method",
    ),
    case(
        "try:\n    import io\nexcept ImportError:\n    import shutil\nfinally:\n    import os\n",
        ib001("io", "import", 2, 12),
        ib001("shutil", "import", 4, 12),
        ib001("os", "import", 6, 12),
        id="in try, except and finally",
    ),
    case(
        "if x:\n    from shutil import copy\nelif y:\n    import io\nelse:\n    import os.path\n",
        ib001("shutil.copy", "from-import", 2, 24),
        ib001("io", "import", 4, 12),
        ib001("os.path", "import", 6, 12),
        id="in every branch of a conditional",
    ),
    case("while x:\n    import os\n", ib001("os", "import", 2, 12), id="in a while loop"),
    case("for _ in r:\n    import io\n", ib001("io", "import", 2, 12), id="in a for loop"),
    case("with c:\n    import shutil\n", ib001("shutil", "import", 2, 12), id="in a with block"),
    case(
        "match q:\n    case 1:\n        import subprocess\n",
        ib001("subprocess", "import", 3, 16),
        id="in a match case",
    ),
    case(
        "def outer():\n    def inner():\n        import os\n",
        ib001("os", "import", 3, 16),
        id="in a nested function",
    ),
]


@pytest.mark.parametrize(("source", "expected"), NESTED_IMPORT_CASES)
def test_imports_count_wherever_they_appear(source: str, expected: list[Seen]) -> None:
    assert findings(source) == expected


# ----------------------------------------------------------------------------- §5 pathlib writes

WRITE_METHODS: Final = (
    "write_text",
    "write_bytes",
    "mkdir",
    "unlink",
    "rename",
    "replace",
    "touch",
    "rmdir",
    "symlink_to",
    "hardlink_to",
    "chmod",
)
UNKNOWN_RECEIVER_METHODS: Final = (
    "write_text",
    "write_bytes",
    "mkdir",
    "unlink",
    "touch",
    "rmdir",
    "symlink_to",
    "hardlink_to",
)
COMMON_METHODS: Final = ("rename", "replace", "chmod")


@pytest.mark.parametrize("method", WRITE_METHODS)
def test_every_write_method_on_a_path_is_reported(method: str) -> None:
    source = f'from pathlib import Path\nPath("x").{method}()\n'

    assert findings(source) == [ib001(f"pathlib.Path.{method}", "pathlib-write", 2, 11)]


PATH_EXPRESSION_CASES = [
    case(
        'from pathlib import Path\nPath("x").write_text("y")\n',
        ib001("pathlib.Path.write_text", "pathlib-write", 2, 11),
        id="a call of Path",
    ),
    case(
        'import pathlib\npathlib.PosixPath("a").touch()\n',
        ib001("pathlib.Path.touch", "pathlib-write", 2, 24),
        id="a call of PosixPath",
    ),
    case(
        'import pathlib as pl\npl.WindowsPath("a").rmdir()\n',
        ib001("pathlib.Path.rmdir", "pathlib-write", 2, 21),
        id="a call of an aliased WindowsPath",
    ),
    case(
        'from pathlib import Path as P\nP("x").unlink()\n',
        ib001("pathlib.Path.unlink", "pathlib-write", 2, 8),
        id="a call of an aliased Path",
    ),
    case(
        "from pathlib import Path\nPath.cwd().mkdir()\nPath.home().touch()\n",
        ib001("pathlib.Path.mkdir", "pathlib-write", 2, 12),
        ib001("pathlib.Path.touch", "pathlib-write", 3, 13),
        id="cwd and home",
    ),
    case(
        'from pathlib import Path\n(Path.cwd() / "a").write_bytes(b"")\n("a" / Path.home()).unlink()\n',
        ib001("pathlib.Path.write_bytes", "pathlib-write", 2, 20),
        ib001("pathlib.Path.unlink", "pathlib-write", 3, 21),
        id="division with a path on either side",
    ),
    case(
        'from pathlib import Path\nPath("a").parent.rmdir()\nPath("a").parents[0].touch()\n',
        ib001("pathlib.Path.rmdir", "pathlib-write", 2, 18),
        ib001("pathlib.Path.touch", "pathlib-write", 3, 22),
        id="parent and parents",
    ),
    case(
        "from pathlib import Path\np = Path('x')\np.mkdir()\n",
        ib001("pathlib.Path.mkdir", "pathlib-write", 3, 3),
        id="a name assigned from a path",
    ),
    case(
        "from pathlib import Path\np: Path = make()\np.rename('b')\n",
        ib001("pathlib.Path.rename", "pathlib-write", 3, 3),
        id="a name annotated with Path",
    ),
    case(
        "from pathlib import Path\nq: Path\nq.unlink()\n",
        ib001("pathlib.Path.unlink", "pathlib-write", 3, 3),
        id="a name declared with a Path annotation and no value",
    ),
    case(
        "from pathlib import Path\nif (w := Path('a')):\n    w.hardlink_to('c')\n",
        ib001("pathlib.Path.hardlink_to", "pathlib-write", 3, 7),
        id="a name bound by walrus",
    ),
    case(
        "from pathlib import Path\nbase = Path('a')\nchild = base / 'b'\nleaf = child.with_suffix('.txt')\n"
        "leaf.write_text('x')\n",
        ib001("pathlib.Path.write_text", "pathlib-write", 5, 6),
        id="names bound from names bound from paths",
    ),
    case(
        "from pathlib import Path\np = Path('a')\np = compute()\np.touch()\n",
        ib001("pathlib.Path.touch", "pathlib-write", 4, 3),
        id="a name is a path regardless of flow",
    ),
    case(
        "from pathlib import Path\ndef f(p: Path):\n    p.write_text('')\n",
        ib001("pathlib.Path.write_text", "pathlib-write", 3, 7),
        id="a parameter annotated with Path",
    ),
    case(
        "from pathlib import Path\ndef f(p: Path | None):\n    p.replace('x')\n",
        ib001("pathlib.Path.replace", "pathlib-write", 3, 7),
        id="a parameter annotated Path or None",
    ),
    case(
        "from pathlib import Path\nfrom typing import Optional\ndef f(p: Optional[Path]):\n    p.chmod(0)\n",
        ib001("pathlib.Path.chmod", "pathlib-write", 4, 7),
        id="a parameter annotated Optional of Path",
    ),
    case(
        "import pathlib\nimport typing\ndef f(p: typing.Optional[pathlib.PosixPath]):\n    p.mkdir()\n",
        ib001("pathlib.Path.mkdir", "pathlib-write", 4, 7),
        id="a parameter annotated typing.Optional of PosixPath",
    ),
    case(
        "from pathlib import Path\nPath.unlink(p)\n",
        ib001("pathlib.Path.unlink", "pathlib-write", 2, 6),
        id="a write method called on the class",
    ),
    case(
        "import pathlib\nremove = pathlib.Path.unlink\n",
        ib001("pathlib.Path.unlink", "pathlib-write", 2, 23),
        id="a write method taken from the class",
    ),
    case(
        "from pathlib import Path\nmake = Path('a').mkdir\n",
        ib001("pathlib.Path.mkdir", "pathlib-write", 2, 18),
        id="a bound write method taken without a call",
    ),
]

DERIVATIONS: Final = (
    "absolute()",
    "expanduser()",
    "joinpath('b')",
    "relative_to('b')",
    "resolve()",
    "with_name('b')",
    "with_stem('b')",
    "with_suffix('.b')",
    "with_segments('b')",
    "readlink()",
)


@pytest.mark.parametrize(("source", "expected"), PATH_EXPRESSION_CASES)
def test_writes_through_path_expressions_are_reported(source: str, expected: list[Seen]) -> None:
    assert findings(source) == expected


@pytest.mark.parametrize("derivation", DERIVATIONS)
def test_derived_paths_are_path_expressions(derivation: str) -> None:
    line = f"Path('a').{derivation}.mkdir()"

    assert findings(f"from pathlib import Path\n{line}\n") == [
        ib001("pathlib.Path.mkdir", "pathlib-write", 2, line.index("mkdir") + 1)
    ]


PATH_OPEN_CASES = [
    case("p.open('w')", ib001("pathlib.Path.open", "pathlib-write", 3, 3), id="w"),
    case("p.open('wb')", ib001("pathlib.Path.open", "pathlib-write", 3, 3), id="wb"),
    case("p.open(mode='a')", ib001("pathlib.Path.open", "pathlib-write", 3, 3), id="mode keyword a"),
    case("p.open('x')", ib001("pathlib.Path.open", "pathlib-write", 3, 3), id="x"),
    case("p.open('r+')", ib001("pathlib.Path.open", "pathlib-write", 3, 3), id="r plus"),
    case("Path.open(p, 'w')", ib001("pathlib.Path.open", "pathlib-write", 3, 6), id="on the class"),
    case("p.open(mode)", ib002("dynamic-open-mode", 3, 3), id="a computed mode"),
    case("p.open(mode=f'{m}')", ib002("dynamic-open-mode", 3, 3), id="an f-string mode"),
    case("opener = p.open", ib002("dynamic-open-mode", 3, 12), id="referenced without a call"),
    case("p.open()", id="no mode"),
    case("p.open('r')", id="r"),
    case("p.open('rb')", id="rb"),
    case("p.open(mode='rt')", id="mode keyword rt"),
    case("p.open('r', encoding='utf-8')", id="r with an encoding"),
    case("Path.open(p)", id="on the class without a mode"),
    case("Path.open(p, 'rb')", id="on the class with rb"),
]


@pytest.mark.parametrize(("line", "expected"), PATH_OPEN_CASES)
def test_path_open_is_reported_only_in_a_write_or_unknown_mode(line: str, expected: list[Seen]) -> None:
    assert findings(f"from pathlib import Path\np = Path('a')\n{line}\n") == expected


@pytest.mark.parametrize("method", UNKNOWN_RECEIVER_METHODS)
def test_pathlib_specific_writes_on_unknown_receivers_are_unverifiable(method: str) -> None:
    source = f"import pathlib\nclass Store:\n    def save(self):\n        self.root.{method}()\n"

    assert findings(source) == [ib002("pathlib-unknown-receiver", 4, 19)]


UNKNOWN_RECEIVER_CASES = [
    case(
        "from pathlib import Path\npaths[0].unlink()\n",
        ib002("pathlib-unknown-receiver", 2, 10),
        id="a subscript",
    ),
    case(
        "from pathlib import PurePath\ntarget.write_text('x')\n",
        ib002("pathlib-unknown-receiver", 2, 8),
        id="a name in a module importing only a pure class",
    ),
    case(
        "from pathlib import Path\nmake_dir = tree.mkdir\n",
        ib002("pathlib-unknown-receiver", 2, 17),
        id="a write name taken without a call",
    ),
    case(
        "from pathlib import Path\np = Path('a')\ndef f():\n    p.touch()\n",
        ib002("pathlib-unknown-receiver", 4, 7),
        id="a path name from another scope",
    ),
]


@pytest.mark.parametrize(("source", "expected"), UNKNOWN_RECEIVER_CASES)
def test_unknown_receivers_in_modules_importing_pathlib_are_unverifiable(
    source: str, expected: list[Seen]
) -> None:
    assert findings(source) == expected


@pytest.mark.parametrize("method", COMMON_METHODS)
def test_common_method_names_on_unknown_receivers_are_not_flagged(method: str) -> None:
    source = (
        f"import pathlib\ndef f(self, target):\n    self.item.{method}('a', 'b')\n    target.{method}(0)\n"
    )

    assert findings(source) == []


@pytest.mark.parametrize(
    "receiver",
    ['"text"', "b'bytes'", "f'x{y}'", "[]", "()", "(1, 2)", "{}", "{1}", "[x for x in y]", "1"],
)
def test_receivers_known_not_to_be_paths_never_count(receiver: str) -> None:
    methods = "\n".join(f"({receiver}).{method}()" for method in UNKNOWN_RECEIVER_METHODS)

    assert findings(f"import pathlib\n{methods}\n") == []


def test_unknown_receivers_do_not_count_in_modules_without_pathlib() -> None:
    assert findings("class Store:\n    def save(self):\n        self.root.mkdir()\n") == []


def test_pathlib_writes_are_not_reported_when_the_entry_is_not_configured() -> None:
    forbidden = parse_forbidden(["os"])

    assert findings("from pathlib import Path\nPath('x').write_text('y')\nz.mkdir()\n", forbidden) == []


# ----------------------------------------------------------------------------- §6 unverifiable

DYNAMIC_IMPORT_CASES = [
    case(
        "from importlib import import_module\nimport_module(name)\n",
        ib002("dynamic-import", 2, 1),
        id="import_module with a computed name",
    ),
    case("__import__(name)\n", ib002("dynamic-import", 1, 1), id="__import__ with a computed name"),
    case("f = __import__\n", ib002("dynamic-import", 1, 5), id="__import__ referenced without a call"),
    case(
        "import importlib\nload = importlib.import_module\n",
        ib002("dynamic-import", 2, 18),
        id="import_module referenced without a call",
    ),
    case(
        "from importlib import import_module\nloaders = [import_module]\n",
        ib002("dynamic-import", 2, 12),
        id="import_module passed as a value",
    ),
    case("import sys\nsys.modules[key]\n", ib002("dynamic-import", 2, 5), id="sys.modules computed key"),
    case(
        "import sys\nsys.modules.get(k)\n", ib002("dynamic-import", 2, 5), id="sys.modules.get computed key"
    ),
    case("import sys\nloaded = sys.modules\n", ib002("dynamic-import", 2, 14), id="sys.modules as a value"),
    case('import sys\nsys.modules.pop("os")\n', ib002("dynamic-import", 2, 5), id="sys.modules.pop"),
    case(
        "import sys\nfor name in sys.modules:\n    pass\n",
        ib002("dynamic-import", 2, 17),
        id="iterating sys.modules",
    ),
    case(
        'from sys import modules\n"os" in modules\n',
        ib002("dynamic-import", 2, 9),
        id="membership in from-imported modules",
    ),
]

EXEC_EVAL_CASES = [
    case('exec("x = 1")\n', ib002("exec", 1, 1), id="exec with a literal"),
    case("exec(code, namespace)\n", ib002("exec", 1, 1), id="exec with a computed argument"),
    case('eval("1 + 1")\n', ib002("eval", 1, 1), id="eval with a literal"),
    case("eval(expression)\n", ib002("eval", 1, 1), id="eval with a computed argument"),
    case('import builtins\nbuiltins.exec("x")\n', ib002("exec", 2, 10), id="builtins.exec"),
    case('from builtins import eval as ev\nev("1")\n', ib002("eval", 2, 1), id="an aliased eval"),
    case("def f():\n    return eval(text)\n", ib002("eval", 2, 12), id="eval inside a function"),
]

BUILTINS_ACCESS_CASES = [
    case(
        "import builtins\ngetattr(builtins, name)\n",
        ib002("builtins-access", 2, 1),
        id="getattr with a computed name",
    ),
    case("import builtins\nvars(builtins)\n", ib002("builtins-access", 2, 1), id="vars of builtins"),
    case(
        "import builtins as b\nnamespace = b.__dict__\n",
        ib002("builtins-access", 2, 15),
        id="builtins.__dict__",
    ),
    case("__builtins__\n", ib002("builtins-access", 1, 1), id="a bare __builtins__"),
    case('x = __builtins__["open"]\n', ib002("builtins-access", 1, 5), id="subscripted __builtins__"),
    case(
        "def f():\n    return __builtins__.get('eval')\n",
        ib002("builtins-access", 2, 12),
        id="__builtins__ inside a function",
    ),
]

DYNAMIC_LOADER_CASES = [
    case("import runpy\n", ib002("dynamic-loader", 1, 8, module="runpy"), id="import runpy"),
    case(
        "from runpy import run_module\n",
        ib002("dynamic-loader", 1, 19, module="runpy.run_module"),
        id="from runpy import a function",
    ),
    case(
        "import importlib.machinery\n",
        ib002("dynamic-loader", 1, 8, module="importlib.machinery"),
        id="import importlib.machinery",
    ),
    case(
        "from importlib.machinery import SourceFileLoader\n",
        ib002("dynamic-loader", 1, 33, module="importlib.machinery.SourceFileLoader"),
        id="from importlib.machinery import a loader",
    ),
    case(
        "import importlib\nimportlib.machinery.SourceFileLoader\n",
        ib002("dynamic-loader", 2, 11, module="importlib.machinery"),
        id="importlib.machinery reached as an attribute",
    ),
    case(
        'import importlib.util\nimportlib.util.spec_from_file_location("a", "b")\n'
        "importlib.util.module_from_spec(spec)\nimportlib.util.find_spec('json')\n",
        ib002("dynamic-loader", 2, 16, module="importlib.util.spec_from_file_location"),
        ib002("dynamic-loader", 3, 16, module="importlib.util.module_from_spec"),
        id="the two importlib.util loaders but not find_spec",
    ),
    case(
        "from importlib.util import module_from_spec\n",
        ib002("dynamic-loader", 1, 28, module="importlib.util.module_from_spec"),
        id="from importlib.util import module_from_spec",
    ),
]


@pytest.mark.parametrize(
    ("source", "expected"),
    DYNAMIC_IMPORT_CASES + EXEC_EVAL_CASES + BUILTINS_ACCESS_CASES + DYNAMIC_LOADER_CASES,
)
def test_dynamic_forms_are_unverifiable(source: str, expected: list[Seen]) -> None:
    assert findings(source) == expected


def test_a_bare_reference_to_exec_is_unverifiable_too() -> None:
    # Changed with the allow-list (issue #15): `e = exec` then `e(...)` ran code unseen.
    assert findings("names = [exec.__name__]\n") == [ib002("exec", 1, 10)]


# ----------------------------------------------------------------------------- nothing to report

NEGATIVE_CASES = [
    # relative imports
    pytest.param("from . import os\nos.system('x')\n", id="from dot import os"),
    pytest.param("from .io import x\n", id="from dot io import x"),
    pytest.param("from .. import subprocess, shutil\n", id="from dot dot import"),
    pytest.param("from .compat import open\nopen('x')\n", id="a relatively imported open"),
    pytest.param(
        "import importlib\nimportlib.import_module('.os', __package__)\n",
        id="import_module of a relative name",
    ),
    pytest.param(
        "import importlib\nimportlib.import_module('..io', package=__package__)\n",
        id="import_module of a parent-relative name",
    ),
    pytest.param("__import__('os', None, None, [], 1)\n", id="__import__ with a relative level"),
    # strings, comments, annotations
    pytest.param('"""Wraps os and io for the kernel."""\n', id="a module docstring"),
    pytest.param("def f():\n    'import os'\n    return 1\n", id="a function docstring"),
    pytest.param("# import os\n# open('x')\nx = 1  # subprocess.run\n", id="comments"),
    pytest.param("x = 'os'\ny = \"import subprocess\"\nz = b'io'\n", id="strings that mention modules"),
    pytest.param("__all__ = ['io', 'os']\n", id="__all__ naming modules"),
    pytest.param(
        'def f(a: "os.PathLike[str]") -> "io.IOBase": ...\ny: "subprocess.Popen[str]"\n',
        id="string annotations",
    ),
    pytest.param("message = f'open {path} with os'\n", id="an f-string mentioning open"),
    # entry matching is by whole dotted segments
    pytest.param("import osmosis\nimport osmosis.path\n", id="osmosis"),
    pytest.param("import iolib\nfrom iolib import x\n", id="iolib"),
    pytest.param("import ossaudiodev\n", id="ossaudiodev"),
    pytest.param("import shutilx\nimport subprocess2\n", id="names that extend an entry"),
    pytest.param("import typing\nx: typing.IO[str]\nfrom typing import IO, BinaryIO\n", id="typing.IO"),
    pytest.param("import pathlib\nfrom pathlib import Path, PurePath\n", id="importing pathlib"),
    # pure path arithmetic and reads
    pytest.param(
        "from pathlib import Path, PurePath\np = Path('a') / 'b' / 'c'\nq = p.with_suffix('.x').parent\n"
        "r = PurePath('a').with_name('b')\nname = str(q.relative_to(p))\n",
        id="pure path arithmetic",
    ),
    pytest.param(
        "from pathlib import Path\np = Path('a')\np.read_text()\np.read_bytes()\nlist(p.iterdir())\n"
        "p.stat()\np.exists()\n",
        id="reads through pathlib",
    ),
    pytest.param(
        "from pathlib import Path\nwith Path('a').open() as f:\n    pass\nPath('b').open('r')\n",
        id="Path.open for reading",
    ),
    # local definitions shadow open and import_module
    pytest.param("def open(path):\n    return path\nopen('x')\n", id="a module-level def open"),
    pytest.param("def run(open):\n    return open('x')\n", id="a parameter named open"),
    pytest.param("def g():\n    open = make()\n    open('y')\n", id="a local variable named open"),
    pytest.param("class A:\n    open = staticmethod(make)\n    x = open('z')\n", id="a class attribute open"),
    pytest.param("from mylib import open\nopen('q')\n", id="an open imported from elsewhere"),
    pytest.param("openers = [open for open in candidates]\n", id="a comprehension variable open"),
    pytest.param("with make() as open:\n    open('x')\n", id="a with target named open"),
    pytest.param(
        "from importlib import import_module\ndef load(import_module):\n    return import_module('os')\n",
        id="a parameter named import_module",
    ),
    pytest.param(
        "from importlib import import_module\ndef other():\n    import_module = make()\n"
        "    return import_module('subprocess')\n",
        id="a local variable named import_module",
    ),
    pytest.param(
        "class K:\n    def import_module(self, name):\n        return name\n"
        "    def go(self):\n        return self.import_module('io')\n",
        id="a method named import_module",
    ),
    pytest.param(
        "def import_module(name):\n    return name\nimport_module('os')\n", id="a def import_module"
    ),
    pytest.param("def f():\n    exec = print\n    exec('x')\n", id="a local exec"),
    pytest.param("import sys\nsys.path.append('x')\nsys.argv\n", id="other attributes of sys"),
    pytest.param("import builtins\nprint(builtins.len)\ngetattr(builtins, 'print')\n", id="other builtins"),
]


@pytest.mark.parametrize("source", NEGATIVE_CASES)
def test_sources_without_host_authority_report_nothing(source: str) -> None:
    assert findings(source) == []


def test_an_empty_module_reports_nothing() -> None:
    assert analyze_source(b"", FilePolicy(FORBIDDEN, None, None)) == []
