"""No input stops the analysis: what cannot be parsed safely is IB004 (spec §2).

Deeply nested input runs in a child process, so that a crash of libcst's native parser
fails these tests instead of killing the test run. Hypothesis then feeds arbitrary bytes,
small generated programs, and programs with arbitrary text inside strings and comments.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import sysconfig
import textwrap
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harness_import_boundary._allow import DEFAULT_ALLOW, AllowList
from harness_import_boundary._analysis import analyze_source
from harness_import_boundary._model import DEFAULT_FORBIDDEN, FilePolicy, RawFinding, parse_forbidden

POLICY: Final = FilePolicy(
    parse_forbidden([*DEFAULT_FORBIDDEN, "trio.run_process"]), AllowList(DEFAULT_ALLOW), "package"
)
MIB: Final = 1024 * 1024
QUICK_SECONDS: Final = 5.0

PROPERTY_SETTINGS: Final = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def unparsable(source: bytes) -> list[tuple[int, int]]:
    """The positions of the IB004 findings of ``source``, checking their form."""
    results = analyze_source(source, POLICY)
    assert all(item.form == "unparsable-source" and item.module == "" for item in results)
    return [(item.line, item.column) for item in results if item.rule == "IB004"]


# ----------------------------------------------------------------------------- syntax and bytes

SYNTAX_ERROR_CASES = [
    pytest.param(b"x = 1\ndef f(:\n    pass\n", (2, 7), id="a bad parameter list"),
    pytest.param(b"import os\nx = (1,\n", (2, 5), id="an unclosed bracket"),
    pytest.param(b"if x:\npass\n", (2, 1), id="a missing indented block"),
    pytest.param(b"if x:\n\ty = 1\n        z = 2\n", (3, 1), id="inconsistent tabs and spaces"),
    pytest.param(b"print 'hello'\n", (1, 1), id="a Python 2 print statement"),
    pytest.param(b"x = 'abc\n", (1, 5), id="an unterminated string"),
]


@pytest.mark.parametrize(("source", "position"), SYNTAX_ERROR_CASES)
def test_a_syntax_error_is_ib004_at_its_position(source: bytes, position: tuple[int, int]) -> None:
    assert unparsable(source) == [position]


def test_a_syntax_error_column_counts_characters_not_bytes() -> None:
    source = "label = 'Grüße'; value = (\n".encode()

    assert unparsable(source) == [(1, source.decode().index("(") + 1)]


def test_a_syntax_error_hides_the_imports_before_it() -> None:
    results = analyze_source(b"import os\nimport io\nclass:\n", POLICY)

    assert [item.rule for item in results] == ["IB004"]


def test_undecodable_bytes_are_ib004_on_their_line() -> None:
    positions = unparsable(b"a = 1\nb = 2\nc = '\xff'\n")

    assert [line for line, _ in positions] == [3]


def test_text_invalid_in_its_declared_encoding_is_ib004() -> None:
    assert unparsable("# coding: ascii\nx = 'é'\n".encode()) != []


def test_an_unknown_declared_encoding_is_ib004() -> None:
    assert unparsable(b"# -*- coding: no-such-codec -*-\nx = 1\n") == [(1, 1)]


def test_a_latin_1_file_with_a_pep_263_declaration_is_analysed() -> None:
    source = "# -*- coding: latin-1 -*-\ngreeting = 'héllo'\nimport os\n".encode("latin-1")

    results = analyze_source(source, POLICY)

    assert [(item.rule, item.module, item.line, item.column) for item in results] == [("IB001", "os", 3, 8)]


def test_a_byte_order_mark_is_not_a_column() -> None:
    results = analyze_source(b"\xef\xbb\xbfimport os\r\nimport io\r\n", POLICY)

    assert [(item.module, item.line, item.column) for item in results] == [("os", 1, 8), ("io", 2, 8)]


NUL_CASES = [
    pytest.param(b"x = 1\ny = '\x00'\n", (2, 6), id="inside a string"),
    pytest.param(b"\x00import os\n", (1, 1), id="at the start"),
    pytest.param(b"import os  # \x00\n", (1, 14), id="inside a comment"),
    pytest.param("x = 'é\x00'\n".encode(), (1, 7), id="after a multi-byte character"),
]


@pytest.mark.parametrize(("source", "position"), NUL_CASES)
def test_a_nul_byte_is_ib004_at_its_position(source: bytes, position: tuple[int, int]) -> None:
    assert unparsable(source) == [position]


def test_utf_16_source_is_ib004() -> None:
    assert unparsable("import os\n".encode("utf-16")) != []


@pytest.mark.parametrize(
    "source",
    [b"", b"\n", b"   \n\n", b"# only a comment\n", b"\xef\xbb\xbf", b"\r\n\r\n"],
    ids=["empty", "one newline", "blank lines", "a comment", "a byte order mark", "CRLF blank lines"],
)
def test_an_empty_or_blank_file_parses_without_findings(source: bytes) -> None:
    assert analyze_source(source, POLICY) == []


def test_a_file_over_4_mib_is_ib004_without_being_parsed() -> None:
    source = b"(" * (4 * MIB + 1)

    results = analyze_source(source, POLICY)

    assert results == [RawFinding("IB004", 1, 1, "", "unparsable-source", "source file exceeds 4 MiB")]


def test_a_file_of_exactly_4_mib_is_analysed() -> None:
    head, tail = b"import os\ntext = '", b"'\n"
    source = head + b"a" * (4 * MIB - len(head) - len(tail)) + tail

    results = analyze_source(source, POLICY)

    assert len(source) == 4 * MIB
    assert [(item.rule, item.module) for item in results] == [("IB001", "os")]


@pytest.mark.slow
def test_the_standard_librarys_pydoc_topics_analyses_without_ib004() -> None:
    topics = Path(sysconfig.get_paths()["stdlib"]) / "pydoc_data" / "topics.py"

    results = analyze_source(topics.read_bytes(), POLICY)

    assert [item for item in results if item.rule == "IB004"] == []


# ----------------------------------------------------------------------------- deep nesting

DEEP_INPUTS: Final[dict[str, bytes]] = {
    "3000 nested parentheses": b"x = " + b"(" * 3000 + b"1" + b")" * 3000 + b"\n",
    "3000 nested list brackets": b"x = " + b"[" * 3000 + b"]" * 3000 + b"\n",
    "10000 attribute accesses": b"x = a" + b".b" * 10_000 + b"\n",
    "10000 calls": b"x = f" + b"()" * 10_000 + b"\n",
    "10000 binary operators": b"x = 1" + b" + 1" * 10_000 + b"\n",
    "10000 subscripts": b"x = a" + b"[0]" * 10_000 + b"\n",
    "10000 unary operators": b"x = " + b"-" * 10_000 + b"1\n",
    "10000 powers": b"x = 2" + b" ** 2" * 10_000 + b"\n",
    "3000 nested lambdas": b"f = " + b"lambda: " * 3000 + b"1\n",
    "3000 nested conditional expressions": b"x = " + b"a if b else " * 3000 + b"c\n",
}

CHILD_SCRIPT: Final = textwrap.dedent(
    """
    import json, sys, time
    from harness_import_boundary._analysis import analyze_source
    from harness_import_boundary._allow import DEFAULT_ALLOW, AllowList
    from harness_import_boundary._model import DEFAULT_FORBIDDEN, FilePolicy, parse_forbidden

    request = json.load(sys.stdin)
    if request["recursion_limit"]:
        sys.setrecursionlimit(request["recursion_limit"])
    forbidden = parse_forbidden(DEFAULT_FORBIDDEN)
    for name, text in request["inputs"].items():
        started = time.perf_counter()
        findings = analyze_source(text.encode("latin-1"), forbidden)
        seconds = time.perf_counter() - started
        rows = [[item.rule, item.line, item.column, item.form] for item in findings]
        print(json.dumps({"name": name, "seconds": seconds, "findings": rows}), flush=True)
    """
)


@dataclass(frozen=True)
class ChildRun:
    """What a child interpreter reported: its exit code and, per input, seconds and findings."""

    returncode: int | None
    seconds: dict[str, float]
    findings: dict[str, list[tuple[str, int, int, str]]]


def analyse_in_child(
    inputs: dict[str, bytes], *, recursion_limit: int = 0, timeout: float = 120.0
) -> ChildRun:
    """Analyse ``inputs`` in a fresh interpreter, so that a crash cannot take the tests with it.

    ``returncode`` is ``None`` when the child did not finish within ``timeout`` seconds.
    """
    request = {
        "recursion_limit": recursion_limit,
        "inputs": {name: source.decode("latin-1") for name, source in inputs.items()},
    }
    try:
        completed = subprocess.run(
            [sys.executable, "-c", CHILD_SCRIPT],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return ChildRun(None, {}, {})
    seconds: dict[str, float] = {}
    findings: dict[str, list[tuple[str, int, int, str]]] = {}
    for line in completed.stdout.splitlines():
        row = json.loads(line)
        name = str(row["name"])
        seconds[name] = float(row["seconds"])
        findings[name] = [
            (str(rule), int(at), int(column), str(form)) for rule, at, column, form in row["findings"]
        ]
    return ChildRun(completed.returncode, seconds, findings)


@pytest.fixture(scope="module")
def deep_run() -> ChildRun:
    return analyse_in_child(DEEP_INPUTS)


def test_deep_nesting_never_kills_the_process(deep_run: ChildRun) -> None:
    assert deep_run.returncode == 0
    assert sorted(deep_run.findings) == sorted(DEEP_INPUTS)


@pytest.mark.parametrize("name", list(DEEP_INPUTS))
def test_deep_nesting_is_ib004_quickly(name: str, deep_run: ChildRun) -> None:
    assert name in deep_run.findings, "the child process did not get this far"
    assert [(rule, line, form) for rule, line, _, form in deep_run.findings[name]] == [
        ("IB004", 1, "unparsable-source")
    ]
    assert deep_run.seconds[name] < QUICK_SECONDS


def test_deep_nesting_is_refused_even_when_the_caller_raised_the_recursion_limit() -> None:
    # The guard must judge at the interpreter's default limit: under a raised limit, input
    # reaches libcst's native parser, which takes minutes over it (or crashes).
    run = analyse_in_child({"chain": b"x = a" + b".b" * 10_000 + b"\n"}, recursion_limit=50_000, timeout=6.0)

    assert run.returncode == 0, "the analysis did not finish within 6 s"
    assert [rule for rule, *_ in run.findings["chain"]] == ["IB004"]


def test_a_valid_file_is_analysed_even_when_warnings_are_errors() -> None:
    # An invalid escape sequence is a DeprecationWarning while parsing, not a syntax error;
    # running under -W error (or pytest's filterwarnings = error) must not change the result.
    source = b"import os\npattern = '\\d+'\n"

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        results = analyze_source(source, POLICY)

    assert [(item.rule, item.module) for item in results] == [("IB001", "os")]


# ----------------------------------------------------------------------------- properties

TOKEN_BYTES: Final = (
    b"import os",
    b"from io import x",
    b"open('f')",
    b"(",
    b")",
    b"[",
    b"]",
    b"\n",
    b"\r\n",
    b"\r",
    b"    ",
    b"\t",
    b"\x00",
    b"\xff",
    b"\xc3\xa9",
    b"'",
    b'"""',
    b"\\",
    b"#",
    b"# -*- coding: latin-1 -*-\n",
    b"lambda",
    b":",
    b".",
    b"f'{",
    b"}",
    b"\xef\xbb\xbf",
)


@PROPERTY_SETTINGS
@given(
    st.one_of(
        st.binary(max_size=400),
        st.lists(st.sampled_from(TOKEN_BYTES), max_size=60).map(b"".join),
    )
)
def test_arbitrary_bytes_give_a_list_of_findings_and_never_raise(source: bytes) -> None:
    results = analyze_source(source, POLICY)

    assert isinstance(results, list)
    assert all(type(item) is RawFinding for item in results)
    assert all(item.rule in ("IB001", "IB002", "IB004") for item in results)
    assert all(item.line >= 1 and item.column >= 1 for item in results)


# A small grammar of Python built from the names the analysis cares about.
MODULES: Final = (
    "os",
    "os.path",
    "io",
    "subprocess",
    "shutil",
    "pathlib",
    "sys",
    "importlib",
    "importlib.util",
    "importlib.machinery",
    "builtins",
    "typing",
    "typing_extensions",
    "trio",
    "json",
    "osmosis",
    "runpy",
)
NAMES: Final = (
    "os",
    "io",
    "path",
    "Path",
    "PurePath",
    "open",
    "sys",
    "modules",
    "import_module",
    "__import__",
    "exec",
    "eval",
    "getattr",
    "vars",
    "builtins",
    "__builtins__",
    "TYPE_CHECKING",
    "run_process",
    "x",
    "self",
    "Optional",
)
ATTRIBUTES: Final = (
    "path",
    "join",
    "open",
    "modules",
    "get",
    "write_text",
    "mkdir",
    "unlink",
    "replace",
    "rename",
    "parent",
    "run_process",
    "TYPE_CHECKING",
    "import_module",
    "__dict__",
    "read_text",
    "cwd",
    "home",
    "with_suffix",
    "Path",
)

names = st.sampled_from(NAMES)
modules = st.sampled_from(MODULES)
text = st.text(st.characters(codec="utf-8"), max_size=12)
string_literals = st.one_of(text.map(repr), st.sampled_from(MODULES).map(repr), st.just("'w'"))
chains = st.tuples(names, st.lists(st.sampled_from(ATTRIBUTES), max_size=3)).map(
    lambda parts: ".".join([parts[0], *parts[1]])
)


def expressions() -> st.SearchStrategy[str]:
    leaves = st.one_of(chains, string_literals, st.integers(0, 9).map(str))
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.tuples(chains, st.lists(inner, max_size=3)).map(
                lambda call: f"{call[0]}({', '.join(call[1])})"
            ),
            st.tuples(chains, inner).map(lambda item: f"{item[0]}[{item[1]}]"),
            st.tuples(inner, inner).map(lambda pair: f"({pair[0]} / {pair[1]})"),
            inner.map(lambda value: f"({value})"),
        ),
        max_leaves=6,
    )


def simple_statements(top_level: bool) -> st.SearchStrategy[str]:
    imports = [
        modules.map(lambda module: f"import {module}"),
        st.tuples(modules, names).map(lambda pair: f"import {pair[0]} as {pair[1]}"),
        st.tuples(modules, names).map(lambda pair: f"from {pair[0]} import {pair[1]}"),
        st.tuples(modules, names, names).map(
            lambda triple: f"from {triple[0]} import {triple[1]} as {triple[2]}"
        ),
        names.map(lambda name: f"from . import {name}"),
    ]
    if top_level:  # a star import is only allowed at module level
        imports.append(modules.map(lambda module: f"from {module} import *"))
    return st.one_of(
        *imports,
        st.tuples(names, expressions()).map(lambda pair: f"{pair[0]} = {pair[1]}"),
        st.tuples(names, chains, expressions()).map(lambda triple: f"{triple[0]}: {triple[1]} = {triple[2]}"),
        expressions(),
        text.filter(
            lambda comment: "\n" not in comment and "\r" not in comment and "\x00" not in comment
        ).map(lambda comment: f"# {comment}"),
    )


def blocks(depth: int, *, top_level: bool = False) -> st.SearchStrategy[list[str]]:
    """Lines of a block; compound statements nest ``depth`` levels at most."""
    simple = simple_statements(top_level).map(lambda line: [line])
    if depth == 0:
        statement = simple
    else:
        # ``pass`` keeps a body made only of comments a valid block.
        body = blocks(depth - 1).map(lambda lines: [*lines, "pass"])
        headers = st.one_of(
            expressions().map(lambda test: f"if {test}:"),
            st.tuples(names, chains).map(lambda pair: f"def function({pair[0]}: {pair[1]}, other):"),
            st.just("class Holder:"),
            st.tuples(names, expressions()).map(lambda pair: f"for {pair[0]} in {pair[1]}:"),
            st.tuples(expressions(), names).map(lambda pair: f"with {pair[0]} as {pair[1]}:"),
        )
        compound = st.tuples(headers, body).map(lambda item: [item[0], *(f"    {line}" for line in item[1])])
        guarded = body.map(
            lambda lines: ["try:", *(f"    {line}" for line in lines), "except Exception:", "    pass"]
        )
        statement = st.one_of(simple, compound, guarded)
    return st.lists(statement, min_size=1, max_size=5).map(
        lambda parts: [line for part in parts for line in part]
    )


programs = blocks(2, top_level=True).map(lambda lines: "\n".join(lines) + "\n")


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(programs)
def test_generated_programs_never_raise_and_findings_lie_inside_the_source(program: str) -> None:
    ast.parse(program)  # the grammar only builds valid Python
    lines = program.split("\n")

    results = analyze_source(program.encode(), POLICY)

    assert [item for item in results if item.rule == "IB004"] == []
    for item in results:
        assert 1 <= item.line <= len(lines) - 1, item
        assert 1 <= item.column <= len(lines[item.line - 1]), item


# Slots where inserted text stays inside a string literal or a comment. The first two lines
# are code, so a comment can never become a PEP 263 encoding declaration.
PREAMBLE: Final = "import json\nimport typing\n"
SLOT_TEMPLATES: Final[tuple[Callable[[str], str], ...]] = (
    lambda inserted: f"value = {inserted!r}\n",
    lambda inserted: f"__all__ = [{inserted!r}, 'io']\n",
    # Not a string annotation: those are code by design (decision 002), so `def f(a: "open()")`
    # rightly adds a finding. A string default of a parameter is plain text.
    lambda inserted: f"def f(a: str = {inserted!r}) -> str:\n    return a\n",
    lambda inserted: f"print({inserted!r})\n",
    lambda inserted: "label = f" + repr(inserted).replace("{", "{{").replace("}", "}}") + " + f'{json}'\n",
    lambda inserted: '"""' + inserted.replace("\\", "\\\\").replace('"', '\\"') + '"""\n',
    lambda inserted: "# " + inserted + "\n",
    lambda inserted: "import io  # " + inserted + "\n",
)
comment_safe = st.characters(codec="utf-8", exclude_characters="\r\n\x00")
inserted_texts = st.one_of(
    st.text(comment_safe, max_size=40),
    st.lists(
        st.sampled_from(
            [
                "import os",
                "open('x')",
                "__import__('io')",
                "'",
                '"',
                "'''",
                "\\",
                "{",
                "}",
                "\\N{",
                "\x0c",
                "é",
            ]
        ),
        max_size=6,
    ).map("".join),
)


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(
    st.lists(st.tuples(st.sampled_from(range(len(SLOT_TEMPLATES))), programs), min_size=1, max_size=4),
    inserted_texts,
)
# Found by this property when slot 2 was a string annotation (code by design, decision 002).
@example(parts=[(2, "import os\n")], inserted="open()")
def test_text_inserted_into_strings_or_comments_never_adds_a_finding(
    parts: list[tuple[int, str]], inserted: str
) -> None:
    def render(slot_text: str) -> bytes:
        pieces = [PREAMBLE]
        for slot, program in parts:
            pieces.append(SLOT_TEMPLATES[slot](slot_text))
            pieces.append(program)
        return "".join(pieces).encode()

    def summary(source: bytes) -> Counter[tuple[str, str, str]]:
        return Counter((item.rule, item.module, item.form) for item in analyze_source(source, POLICY))

    assert summary(render(inserted)) == summary(render(""))
