"""What the per-file analysis reports, form by form: imports and object entries (spec §3, §4).

Every row of the §4 table and every bullet of §3 has cases here, each asserting the rule,
module, form, line and column of every finding.
"""

from __future__ import annotations

import pytest
from import_boundary_findings import (
    Seen,
    case,
    findings,
    ib001,
    ib002,
)

from harness_import_boundary._model import parse_forbidden

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
