"""The task-manifest reader: strict YAML, size, encoding, depth and properties (exit-gate.md §2.3)."""

from __future__ import annotations

import pytest
import yaml
from exit_gate_manifest_examples import (
    EXAMPLE,
    MINIMAL,
    PROPERTIES,
    assert_manifest_or_error,
    base,
    issues_of,
    loose,
    outcome,
)
from hypothesis import given
from hypothesis import strategies as st

from harness_exit_gate.manifest import (
    ManifestParseError,
    TaskManifest,
    decode_task_manifest,
    load_task_manifest,
)

# ------------------------------------------------------------------ strict YAML


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("2026-01-01", "timestamp"),
        ("2026-01-01T10:00:00Z", "timestamp"),
        ("yes", "bool"),
        ("off", "bool"),
        ("12", "int"),
        ("0x1F", "int"),
        ("1_000", "int"),
        ("1.5", "float"),
        (".nan", "float"),
        ("~", "null"),
        ("null", "null"),
        ("", "null"),
        ("=", "value"),
    ],
)
def test_implicitly_typed_scalars_are_never_coerced_back_to_strings(value: str, kind: str) -> None:
    text = MINIMAL.replace("title: Kernel events", f"title: {value}")

    assert issues_of(text) == [("title", f"expected a string, got {kind}")]


@pytest.mark.parametrize("value", ['"2026-01-01"', "'yes'", '"12"', "'~'"])
def test_quoted_scalars_are_strings(value: str) -> None:
    text = MINIMAL.replace("title: Kernel events", f"title: {value}")

    assert load_task_manifest(text).title == value[1:-1]


def test_a_folded_goal_keeps_its_trailing_newline_and_a_literal_one_its_lines() -> None:
    folded = MINIMAL.replace("goal: Events round-trip.", "goal: >\n  one\n  two\n")
    literal = MINIMAL.replace("goal: Events round-trip.", "goal: |\n  one\n  two\n")

    assert load_task_manifest(folded).goal == "one two\n"
    assert load_task_manifest(literal).goal == "one\ntwo\n"


def test_a_malformed_yaml_int_is_a_type_error_not_a_crash() -> None:
    text = MINIMAL + "budget: {max_tool_calls: 0b_}\n"

    assert issues_of(text) == [("budget.max_tool_calls", "expected a positive integer, got malformed int")]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (MINIMAL + "title: again\n", [("title", "duplicate key")]),
        (
            MINIMAL.replace("{fs.read: allow}", "{fs.read: allow, fs.read: deny}"),
            [("permissions.fs.read", "duplicate key")],
        ),
        (
            MINIMAL.replace("{fs.read: allow}", '{process.exec: {"git *": allow, "git *": deny}}'),
            [("permissions.process.exec.git *", "duplicate key")],
        ),
        (
            MINIMAL.replace("{fs.read: allow}", '{process.exec: {"git *": allow, git *: deny}}'),
            [("permissions.process.exec.git *", "duplicate key")],
        ),
        (MINIMAL + "extra: {a: 1, a: 2}\n", [("extra.a", "duplicate key"), ("extra", "unknown field")]),
        (
            MINIMAL.replace("title: Kernel events", "title: &t Kernel events"),
            [("title", "anchors are not allowed (&t)")],
        ),
        (
            MINIMAL.replace("title: Kernel events", "title: &t Kernel events") + "x: *t\n",
            [
                ("title", "anchors are not allowed (&t)"),
                ("x", "aliases are not allowed (*t)"),
                ("x", "unknown field"),
            ],
        ),
        (
            MINIMAL.replace("delivery: {type: pull_request}", "delivery: {<<: {type: merge}}"),
            [("delivery.<<", "merge keys are not allowed")],
        ),
        (
            MINIMAL.replace("title: Kernel events", "title: !!str 2026-01-01"),
            [("title", "explicit tags are not allowed (!!str)")],
        ),
        (
            MINIMAL.replace("title: Kernel events", "title: ! 12"),
            [("title", "explicit tags are not allowed (!)")],
        ),
        (
            MINIMAL.replace("title: Kernel events", "title: !custom x"),
            [("title", "explicit tags are not allowed (!custom)")],
        ),
        (
            MINIMAL.replace("acceptance: [round-trips]", "acceptance: !!seq [round-trips]"),
            [("acceptance", "explicit tags are not allowed (!!seq)")],
        ),
        (
            MINIMAL.replace("{fs.read: allow}", "{fs.read: allow, !!str fs.write: ask}"),
            [("permissions.fs.write", "explicit tags are not allowed (!!str)")],
        ),
        (
            MINIMAL.replace("{fs.read: allow}", "{fs.read: allow, yes: ask}"),
            [("permissions", "keys must be strings, got bool")],
        ),
        (
            MINIMAL.replace("{fs.read: allow}", "{fs.read: allow, [a]: ask}"),
            [("permissions", "keys must be strings, got a collection")],
        ),
        (
            MINIMAL.replace("{fs.read: allow}", "{fs.read: &e allow, network: *e}"),
            [
                ("permissions.fs.read", "anchors are not allowed (&e)"),
                ("permissions.network", "aliases are not allowed (*e)"),
            ],
        ),
    ],
)
def test_duplicate_keys_anchors_aliases_merge_keys_and_tags_are_refused_at_any_depth(
    text: str, expected: list[tuple[str, str]]
) -> None:
    assert issues_of(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", [("<root>", "manifest must contain exactly one YAML document, found none")]),
        ("# only a comment\n", [("<root>", "manifest must contain exactly one YAML document, found none")]),
        (
            MINIMAL + "---\n" + MINIMAL,
            [("<root>", "manifest must contain exactly one YAML document, found several")],
        ),
        ("---\n", [("<root>", "expected a mapping, got null")]),
        ("- a\n- b\n", [("<root>", "expected a mapping, got sequence")]),
        ("just text\n", [("<root>", "expected a mapping, got string")]),
    ],
)
def test_the_text_must_hold_exactly_one_mapping_document(text: str, expected: list[tuple[str, str]]) -> None:
    assert issues_of(text) == expected


def test_an_explicit_document_with_end_marker_is_one_document() -> None:
    assert load_task_manifest("---\n" + MINIMAL + "...\n").id == "kernel-0001"


@pytest.mark.parametrize(
    "text", ["id: [unclosed\n", "a: b: c\n", "id: x\n- y\n", "title: 'x\n", "\tid: x\n", "key: \x00\n"]
)
def test_syntax_errors_are_reported_at_the_yaml_path(text: str) -> None:
    issues = issues_of(text)

    assert len(issues) == 1
    assert issues[0][0] == "<yaml>"
    assert issues[0][1].startswith("invalid YAML: ")
    assert "\n" not in issues[0][1]


def test_a_nul_escape_reaches_the_allowed_paths_check() -> None:
    text = MINIMAL.replace("[packages/kernel/**]", '["packages/\\0kernel"]')

    assert issues_of(text) == [("allowed_paths.0", "must not contain NUL")]


# ------------------------------------------------------------------ size and encoding


def test_the_size_limit_counts_utf8_bytes() -> None:
    filler = "é" * ((256 * 1024 - len(MINIMAL.encode())) // 2 + 1)
    text = MINIMAL + f"# {filler}\n"
    assert len(text) < 256 * 1024 < len(text.encode())

    expected = [("<root>", "manifest exceeds 262144 bytes of UTF-8")]
    assert issues_of(text) == expected
    assert issues_of(text.encode()) == expected


def test_a_manifest_of_exactly_the_limit_loads() -> None:
    padding = 256 * 1024 - len(MINIMAL.encode()) - len("# \n")
    text = MINIMAL + "# " + "x" * padding + "\n"
    assert len(text.encode()) == 256 * 1024

    assert load_task_manifest(text).id == "kernel-0001"


def test_bytes_that_are_not_utf8_are_refused() -> None:
    issues = issues_of(MINIMAL.encode() + b"# \xff\xfe\n")

    assert len(issues) == 1
    assert issues[0][0] == "<yaml>"
    assert issues[0][1].startswith("invalid YAML: not UTF-8")
    assert issues_of(MINIMAL.encode("utf-16"))[0][0] == "<yaml>"


def test_text_with_a_lone_surrogate_is_refused() -> None:
    assert issues_of(MINIMAL + "# \ud800\n") == [("<yaml>", "invalid YAML: not UTF-8 (lone surrogate)")]


@pytest.mark.parametrize("value", [None, 1, bytearray(b"id: x"), ["id: x"]])
def test_load_refuses_anything_but_text(value: object) -> None:
    with pytest.raises(ManifestParseError) as caught:
        load_task_manifest(loose(value))
    assert caught.value.issues[0].path == "<root>"


# ------------------------------------------------------------------ depth


def test_nesting_up_to_64_levels_is_read_and_checked_by_type() -> None:
    text = MINIMAL.replace("title: Kernel events", "title: " + "[" * 63 + "]" * 63)

    assert issues_of(text) == [("title", "expected a string, got sequence")]


def test_deeper_nesting_stops_reading_quickly_without_recursion() -> None:
    depth = 100_000
    text = MINIMAL.replace("title: Kernel events", "title: " + "[" * depth + "]" * depth)

    assert issues_of(text) == [("title" + ".0" * 63, "nesting deeper than 64 levels is not allowed")]
    block = MINIMAL + "".join(" " * level + f"k{level}:\n" for level in range(80))
    assert issues_of(block)[-1][1] == "nesting deeper than 64 levels is not allowed"


def test_deeply_nested_decoded_values_are_not_walked() -> None:
    nested: list[object] = []
    for _ in range(100_000):
        nested = [nested]
    document = base()
    document["goal"] = nested

    assert issues_of(document) == [("goal", "expected a string, got sequence")]


# ------------------------------------------------------------------ properties

yaml_fragments = st.sampled_from(
    [
        "id: ",
        "title: ",
        "goal: ",
        "acceptance:",
        "allowed_paths:",
        "permissions:",
        "budget:",
        "delivery:",
        "type: ",
        "max_tool_calls: ",
        "fs.read: ",
        "allow",
        "deny",
        "- ",
        "  ",
        "\n",
        ": ",
        "[",
        "]",
        "{",
        "}",
        ",",
        "&a ",
        "*a",
        "<<: ",
        "!!str ",
        "! ",
        "? ",
        "---\n",
        "...\n",
        "'",
        '"',
        "\\",
        "#",
        "|",
        ">",
        "0b_",
        "2026-01-01",
        "yes",
        "~",
        "1",
        "%YAML 1.1\n",
        "%TAG ! tag:x,2000:\n",
        "\t",
        "é",
    ]
)


@PROPERTIES
@given(fragments=st.lists(yaml_fragments, max_size=40))
def test_arbitrary_yamlish_text_gives_a_manifest_or_a_parse_error(fragments: list[str]) -> None:
    assert_manifest_or_error(outcome("".join(fragments)))


@pytest.mark.slow
@PROPERTIES
@given(data=st.data())
def test_mutations_of_the_example_give_a_manifest_or_a_parse_error(data: st.DataObject) -> None:
    text = EXAMPLE
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(text)))
        end = data.draw(st.integers(position, min(len(text), position + 8)))
        text = text[:position] + data.draw(yaml_fragments) + text[end:]
    result = outcome(text)
    assert_manifest_or_error(result)
    if isinstance(result, TaskManifest):
        assert decode_task_manifest(yaml.safe_load(text)) == result


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8)),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=12,
)


@pytest.mark.slow
@PROPERTIES
@given(
    overrides=st.dictionaries(
        st.sampled_from(
            ["id", "title", "goal", "acceptance", "allowed_paths", "permissions", "budget", "delivery", "x"]
        ),
        json_values,
        max_size=4,
    )
)
def test_arbitrary_decoded_documents_give_a_manifest_or_a_parse_error(overrides: dict[str, object]) -> None:
    document = base()
    document.update(overrides)
    assert_manifest_or_error(outcome(document))
