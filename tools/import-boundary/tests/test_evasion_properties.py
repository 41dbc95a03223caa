"""Generated evasions: the corpus's primitives composed, respelled and wrapped (issue #15).

Hypothesis builds programs from a capability (a way to reach builtins, frames, globals or a
host module), an identifier spelling (ASCII, fullwidth or mathematical letters, which the
interpreter folds together with NFKC), a syntactic context (a function body, a default, a
decorator, a comprehension, an f-string, a string annotation, a match case…) and a chain of
aliases. Each must be
flagged on a line of its own program. The same contexts around harmless expressions must
stay clean, and respelling any program's identifiers must not change what it reports.
"""

from __future__ import annotations

import io
import itertools
import keyword
import textwrap
import tokenize
from pathlib import Path
from typing import Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_import_boundary import load_config
from harness_import_boundary._allow import AllowList
from harness_import_boundary._analysis import analyze_source
from harness_import_boundary._model import FilePolicy, RawFinding, parse_forbidden

REPOSITORY: Final = Path(__file__).resolve().parents[3]
_CONFIG: Final = load_config(REPOSITORY / "pyproject.toml")
_KERNEL_ENTRIES: Final = dict(_CONFIG.per_file_allow)["packages/kernel/src/**"]
POLICY: Final = FilePolicy(
    parse_forbidden(_CONFIG.forbidden), AllowList((*_CONFIG.allow, *_KERNEL_ENTRIES)), "harness_kernel"
)
PRELUDE: Final = "import enum\nimport json\nimport operator\nimport re\nimport typing\n"

# Templates whose {0}, {1}… are identifiers, respelled independently.
CAPABILITIES: Final[list[tuple[str, list[str]]]] = [
    ("{0}", ["exec"]),
    ("{0}", ["eval"]),
    ("{0}", ["open"]),
    ("{0}", ["compile"]),
    ("{0}", ["__import__"]),
    ("{0}", ["breakpoint"]),
    ("{0}", ["__builtins__"]),
    ("{0}()", ["globals"]),
    ("{0}()", ["vars"]),
    ("{0}()", ["locals"]),
    ("{0}.{1}", ["print", "__self__"]),
    ("(lambda: 0).{0}", ["__globals__"]),
    ("(lambda: 0).{0}", ["__builtins__"]),
    ("{0}.{1}()", ["object", "__subclasses__"]),
    ('{0}({1}, "__subclasses__")', ["getattr", "object"]),
    ("{0}({1}, {2})", ["getattr", "print", "name"]),
    ("{0}.{1}[{2}]", ["type", "__dict__", "key"]),
    ("{0}.{1}", ["typing", "sys"]),
    ("{0}.{1}", ["typing", "get_type_hints"]),
    ("{0}.{1}", ["enum", "bltns"]),
    ("{0}.{1}", ["json", "decoder"]),
    ('{0}.{1}("__self__")', ["operator", "attrgetter"]),
    ("{0}.{1}({2})", ["operator", "methodcaller", "name"]),
    ("(x for x in ()).{0}", ["gi_frame"]),
    ("{0}", ["typing"]),
]
HARMLESS: Final[list[tuple[str, list[str]]]] = [
    ("{0}", ["len"]),
    ("{0}", ["print"]),
    ("{0}.{1}", ["re", "compile"]),
    ("{0}.{1}", ["typing", "Final"]),
    ("{0}.{1}", ["json", "dumps"]),
    ('{0}(x, "name", None)', ["getattr"]),
    ('{0}.{1}("name")', ["operator", "attrgetter"]),
    ('"text"', []),
    ("(1, 2)", []),
]
# Each context holds one expression at {e}; all are valid whatever the expression.
CONTEXTS: Final = [
    "value = {e}\n",
    "value = ({e})\n",
    "value = (\n    {e}\n)\n",
    "def function():\n    return {e}\n",
    "async def function():\n    return {e}\n",
    "def function(value={e}):\n    return value\n",
    "handler = lambda: {e}\n",
    "values = [{e} for _ in range(1)]\n",
    "values = {{key: {e} for key in ()}}\n",
    "class Holder:\n    value = {e}\n",
    "@({e})\ndef decorated():\n    pass\n",
    "text = f'{{{e}}}'\n",
    "if (bound := {e}):\n    pass\n",
    "try:\n    value = {e}\nexcept Exception:\n    pass\n",
    "with context() as handle:\n    value = {e}\n",
    "match subject:\n    case _:\n        value = {e}\n",
    "value = {e} if condition else None\n",
    "print({e})\n",
    "values = [*{{{e}}}]\n",
    "class Holder:\n    value: '''{e}'''\n",
    "def function(value: '''{e}''') -> None:\n    pass\n",
]


@st.composite
def spelled(draw: st.DrawFn, name: str) -> str:
    """``name`` with each ASCII letter kept, made fullwidth or made mathematical bold."""
    letters: list[str] = []
    for character in name:
        style = draw(st.sampled_from(("ascii", "fullwidth", "bold")))
        if not (character.isascii() and character.isalpha()) or style == "ascii":
            letters.append(character)
        elif style == "fullwidth":
            letters.append(chr(ord(character) + 0xFEE0))
        else:
            base = 0x1D41A if character.islower() else 0x1D400
            letters.append(chr(base + ord(character.lower()) - ord("a")))
    return "".join(letters)


@st.composite
def expressions(draw: st.DrawFn, templates: list[tuple[str, list[str]]]) -> str:
    template, names = draw(st.sampled_from(templates))
    return template.format(*[draw(spelled(name)) for name in names])


@st.composite
def programs(draw: st.DrawFn, templates: list[tuple[str, list[str]]]) -> str:
    expression = draw(expressions(templates))
    context = draw(st.sampled_from(CONTEXTS))
    body = context.format(e=expression)
    aliases = draw(st.integers(min_value=0, max_value=2))
    if aliases and context == "value = {e}\n":
        names = ["value", *(f"alias{index}" for index in range(aliases))]
        body += "".join(f"{new} = {old}\n" for old, new in itertools.pairwise(names))
    return PRELUDE + body


def analysed(program: str) -> list[RawFinding]:
    return analyze_source(program.encode(), POLICY)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(programs(CAPABILITIES))
def test_a_capability_in_any_context_and_spelling_is_flagged_on_its_own_lines(program: str) -> None:
    findings = analysed(program)
    prelude_lines = PRELUDE.count("\n")

    flagged = [item for item in findings if item.rule in ("IB001", "IB002")]
    assert flagged, program
    assert all(prelude_lines < item.line <= program.count("\n") for item in flagged), (program, findings)


@settings(max_examples=200, deadline=None)
@given(programs(HARMLESS))
def test_harmless_expressions_in_any_context_and_spelling_stay_clean(program: str) -> None:
    assert analysed(program) == [], program


SNIPPETS: Final = [
    "import typing\nm = typing.sys.modules['os']\n",
    "import enum\nenum.bltns.open('x')\n",
    "run = exec\nrun('x')\n",
    "print.__self__.open('x', 'w')\n",
    "from pathlib import PurePath\nfound = PurePath.__subclasses__()\n",
    "import trio\nasync def go():\n    await trio.lowlevel.open_process(['id'])\n",
    "import operator\ncall = operator.methodcaller('__subclasses__')\n",
    "import json\njson.loads = len\nalias = json\n",
    "from json import tool\n",
    "getattr(x, name)\nvalue = x.__dict__[name]\n",
    "import sqlite3\nimport os\nfrom subprocess import run\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import sqlite3\n",
    textwrap.dedent(
        """\
        import math
        import trio
        from harness_workspace import Workspace

        async def run(workspace: Workspace, deadline: float) -> int:
            with trio.CancelScope(deadline=deadline):
                await trio.lowlevel.checkpoint()
            return math.floor(trio.current_time())
        """
    ),
    "class Error(Exception):\n    def __reduce__(self):\n        return (type(self), (), self.__dict__)\n",
]


@st.composite
def respelled(draw: st.DrawFn, source: str) -> str:
    """``source`` with the letters of every identifier token respelled (strings untouched)."""
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    lines = source.splitlines(keepends=True)
    for token in reversed(tokens):
        if (
            token.type != tokenize.NAME
            or keyword.iskeyword(token.string)
            or keyword.issoftkeyword(token.string)
        ):
            continue
        (row, start), (_, end) = token.start, token.end
        line = lines[row - 1]
        lines[row - 1] = line[:start] + draw(spelled(token.string)) + line[end:]
    return "".join(lines)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SNIPPETS).flatmap(lambda source: st.tuples(st.just(source), respelled(source))))
def test_respelling_identifiers_never_changes_the_findings(pair: tuple[str, str]) -> None:
    original, changed = pair

    def key(items: list[RawFinding]) -> list[tuple[str, int, int, str, str]]:
        return sorted((item.rule, item.line, item.column, item.module, item.form) for item in items)

    assert key(analysed(changed)) == key(analysed(original)), changed
