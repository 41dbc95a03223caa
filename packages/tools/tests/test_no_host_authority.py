"""harness_tools reaches no host authority (spec §1): an interim, AST-based import check.

The project's import-boundary checker will replace this. Until then, every module of the
package is parsed (not grepped, so comments and strings cannot trip it) and may not import
``os``, ``subprocess``, ``shutil``, ``io`` or ``pathlib`` (or their submodules), nor call
the builtin ``open``, ``__import__`` or ``importlib.import_module``.
"""

from __future__ import annotations

import ast
import pathlib
from typing import Final

import pytest

PACKAGE_DIRECTORY: Final = pathlib.Path(__file__).resolve().parents[1] / "src" / "harness_tools"
HOST_MODULES: Final = frozenset({"os", "subprocess", "shutil", "io", "pathlib"})
DYNAMIC_IMPORTERS: Final = frozenset({("importlib", "import_module")})
BUILTIN_AUTHORITY: Final = frozenset({"open", "__import__"})


def host_authority_uses(source: str, filename: str = "<snippet>") -> list[str]:
    """Every host-authority import or builtin use in ``source``, as ``"line N: what"`` strings."""
    uses: list[str] = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            uses.extend(
                f"line {node.lineno}: import {alias.name}"
                for alias in node.names
                if alias.name.split(".")[0] in HOST_MODULES
            )
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            root = node.module.split(".")[0]
            names = {alias.name for alias in node.names}
            if root in HOST_MODULES:
                uses.append(f"line {node.lineno}: from {node.module} import ...")
            elif any((node.module, name) in DYNAMIC_IMPORTERS for name in names):
                uses.append(f"line {node.lineno}: from {node.module} import import_module")
            elif node.module == "builtins" and names & BUILTIN_AUTHORITY:
                uses.append(f"line {node.lineno}: from builtins import {sorted(names & BUILTIN_AUTHORITY)}")
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in BUILTIN_AUTHORITY:
            # Any use of the name, not only a direct call: ``reader = open`` is as bad.
            uses.append(f"line {node.lineno}: {node.id}")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner, attribute = node.value.id, node.attr
            if (owner, attribute) in DYNAMIC_IMPORTERS or (
                owner == "builtins" and attribute in BUILTIN_AUTHORITY
            ):
                uses.append(f"line {node.lineno}: {owner}.{attribute}")
    return uses


def package_modules() -> list[pathlib.Path]:
    return sorted(PACKAGE_DIRECTORY.rglob("*.py"))


def test_the_package_has_modules_to_check() -> None:
    names = {path.name for path in package_modules()}

    assert {"__init__.py", "_model.py", "_boundaries.py", "_read_file.py"} <= names


@pytest.mark.parametrize(
    "module", [pytest.param(path, id=str(path.relative_to(PACKAGE_DIRECTORY))) for path in package_modules()]
)
def test_module_reaches_no_host_authority(module: pathlib.Path) -> None:
    assert host_authority_uses(module.read_text(encoding="utf-8"), str(module)) == []


# ------------------------------------------------------------------ the checker itself


def test_checker_flags_every_use_in_a_mixed_snippet() -> None:
    source = 'import os as o\nfrom subprocess import run\nopen("x")\n'

    assert host_authority_uses(source) == [
        "line 1: import os",
        "line 2: from subprocess import ...",
        "line 3: open",
    ]


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("import os", id="import-os"),
        pytest.param("import os as o", id="import-os-as"),
        pytest.param("import os.path", id="import-submodule"),
        pytest.param("import json, subprocess", id="second-of-two"),
        pytest.param("from subprocess import run", id="from-subprocess"),
        pytest.param("from os.path import join", id="from-submodule"),
        pytest.param("import shutil", id="shutil"),
        pytest.param("from io import StringIO", id="from-io"),
        pytest.param("import pathlib", id="pathlib"),
        pytest.param("from pathlib import Path", id="from-pathlib"),
        pytest.param('open("x")', id="open-call"),
        pytest.param('with open("x", "w") as handle:\n    pass', id="open-in-with"),
        pytest.param("reader = open", id="open-alias"),
        pytest.param('__import__("os")', id="dunder-import"),
        pytest.param('import importlib\nimportlib.import_module("os")', id="import-module"),
        pytest.param('from importlib import import_module\nimport_module("os")', id="from-importlib"),
        pytest.param('import builtins\nbuiltins.open("x")', id="builtins-open"),
        pytest.param("from builtins import open as o", id="from-builtins"),
        pytest.param("def f():\n    import subprocess", id="nested-in-a-function"),
        pytest.param("try:\n    import os\nexcept ImportError:\n    pass", id="inside-try"),
    ],
)
def test_checker_flags_host_authority(source: str) -> None:
    assert host_authority_uses(source) != []


@pytest.mark.parametrize(
    "source",
    [
        pytest.param('text = "import os"', id="import-in-a-string"),
        pytest.param('"""\nimport subprocess\nopen("x")\n"""', id="docstring"),
        pytest.param("# import os\n# open('x')", id="comment"),
        pytest.param("import osmosis", id="osmosis"),
        pytest.param("from osmosis import os", id="name-in-another-module"),
        pytest.param("import iox\nimport pathlibx", id="prefix-lookalikes"),
        pytest.param("import importlib.metadata", id="importlib-metadata"),
        pytest.param("from importlib.metadata import version", id="from-importlib-metadata"),
        pytest.param("from . import io", id="relative-import"),
        pytest.param("handle.open()", id="method-named-open"),
        pytest.param("self.os = 1\nopener = 2", id="attributes-and-similar-names"),
        pytest.param("import re, math, weakref\nimport msgspec", id="harmless-imports"),
    ],
)
def test_checker_does_not_flag_harmless_code(source: str) -> None:
    assert host_authority_uses(source) == []
