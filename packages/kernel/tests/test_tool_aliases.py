"""Provider-safe tool name aliases: injective, reversible, deterministic, stable (decision 040).

The oracles here are written from the documented rules, not taken from the module: the
provider alphabet is checked character by character and the readable form is rebuilt by a
loop, so a change of rule in ``_aliases.py`` fails these tests instead of following them.
"""

from __future__ import annotations

import hashlib
import pickle
import re
import string
import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from runtime_helpers import d, drain, make_input, pure_tool, registry, tool_turn, types

from harness_kernel.events import Event
from harness_kernel.models import FakeModel, ScriptedTurn, ToolNameAliasError, ToolNameAliases
from harness_kernel.models._aliases import (
    MODEL_TOOL_NAME_DUPLICATE,
    MODEL_TOOL_NAME_INVALID,
    MODEL_TOOL_NAME_UNKNOWN,
    PROVIDER_TOOL_NAME_PATTERN,
)
from harness_kernel.runtime import MinimalAgentRuntime
from harness_tools import create_tool

_ALPHABET = frozenset(string.ascii_letters + string.digits + "_-")
_REFUSED = ("Cc", "Cf", "Cs", "Zl", "Zp")


# ------------------------------------------------------------------ oracles (from the rules)
def is_provider_safe(name: str) -> bool:
    return 1 <= len(name) <= 64 and all(char in _ALPHABET for char in name)


def readable_form(name: str) -> str:
    """Every run of characters outside the alphabet becomes one ``_``."""
    out: list[str] = []
    for char in name:
        if char in _ALPHABET:
            out.append(char)
        elif not out or out[-1] != "\x00":
            out.append("\x00")
    return "".join(out).replace("\x00", "_")


def usable_readable(name: str) -> str | None:
    form = readable_form(name)
    if len(form) > 64 or not any(char.isascii() and char.isalnum() for char in form):
        return None
    return form


def digest(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:12]


def aliases_of(table: ToolNameAliases) -> dict[str, str]:
    return dict(table.pairs)


# ------------------------------------------------------------------ strategies
registry_names = st.from_regex(r"[A-Za-z][A-Za-z0-9_.\-]{0,63}", fullmatch=True)
# A small alphabet makes names that share a readable form, so collisions are the rule.
colliding_names = st.text(alphabet="ab_-.: é读\u00a0", min_size=1, max_size=6).filter(str.strip)


def _long_name(head: str, tail: str) -> str:
    return head * 64 + tail


long_names = st.builds(_long_name, st.sampled_from("xy"), st.text("ab.:", max_size=4))
printable_names = st.text(st.characters(exclude_categories=_REFUSED), min_size=1, max_size=80).filter(
    str.strip
)
canonical_names = st.one_of(registry_names, colliding_names, long_names, printable_names)
name_lists = st.lists(canonical_names, unique=True, max_size=24)


@st.composite
def hostile_name_lists(draw: st.DrawFn) -> list[str]:
    """Names plus some of their own table's aliases (and the first fallbacks) as names."""
    names = draw(name_lists)
    issued = [alias for name, alias in ToolNameAliases(names).pairs if alias != name]
    extra: list[str] = []
    if issued:
        for alias in draw(st.lists(st.sampled_from(issued), unique=True, max_size=4)):
            extra += [alias, f"{alias}-1"]
    everything = list(dict.fromkeys(names + extra))
    return draw(st.permutations(everything))


# ------------------------------------------------------------------ properties
@given(hostile_name_lists())
def test_every_name_gets_one_provider_safe_alias_and_no_two_names_share_one(names: list[str]) -> None:
    table = ToolNameAliases(names)
    assert [name for name, _ in table.pairs] == names
    aliases = [alias for _, alias in table.pairs]
    assert all(is_provider_safe(alias) for alias in aliases)
    assert all(re.fullmatch(PROVIDER_TOOL_NAME_PATTERN, alias) for alias in aliases)
    assert len(set(aliases)) == len(names) == len(table)


@given(hostile_name_lists())
def test_every_alias_resolves_back_to_its_canonical_name(names: list[str]) -> None:
    table = ToolNameAliases(names)
    for name in names:
        alias = table.alias(name)
        assert table.canonical(alias) == name
        assert table.call_name(alias) == name


@given(hostile_name_lists(), st.randoms(use_true_random=False))
def test_the_table_depends_on_the_set_of_names_not_on_their_order(names: list[str], rng: Any) -> None:
    table = ToolNameAliases(names)
    assert ToolNameAliases(list(names)) == table
    assert hash(ToolNameAliases(tuple(names))) == hash(table)
    shuffled = list(names)
    rng.shuffle(shuffled)
    assert aliases_of(ToolNameAliases(shuffled)) == aliases_of(table)


@given(hostile_name_lists())
def test_a_provider_safe_name_is_always_its_own_alias(names: list[str]) -> None:
    table = ToolNameAliases(names)
    for name in names:
        if is_provider_safe(name):
            assert table.alias(name) == name


@given(hostile_name_lists())
def test_a_name_gets_its_readable_form_exactly_when_no_other_name_competes_for_it(names: list[str]) -> None:
    table = ToolNameAliases(names)
    forms = {name: (name if is_provider_safe(name) else usable_readable(name)) for name in names}
    for name in names:
        form = forms[name]
        if is_provider_safe(name) or form is None:
            continue
        competed = any(other != name and forms[other] == form for other in names)
        assert (table.alias(name) == form) is not competed


def _without_q(names: list[str]) -> list[str]:
    return [name for name in names if not name.startswith("Q")]


def _with_q(tail: str) -> str:
    return ("Q" + tail)[:256]


@given(name_lists.map(_without_q), st.data())
def test_adding_unrelated_names_changes_no_alias(names: list[str], data: st.DataObject) -> None:
    # Names that start with "Q" have aliases that start with "Q" (their readable form keeps
    # the letter); the others never do, so the two groups cannot compete for an alias.
    unrelated = data.draw(st.lists(canonical_names.map(_with_q), unique=True, max_size=8))
    before = aliases_of(ToolNameAliases(names))
    mixed = data.draw(st.permutations(names + [name for name in unrelated if name not in before]))
    after = aliases_of(ToolNameAliases(mixed))
    assert {name: after[name] for name in names} == before


@given(hostile_name_lists(), st.text(max_size=300))
def test_a_name_the_table_never_issued_resolves_to_no_tool(names: list[str], sent: str) -> None:
    table = ToolNameAliases(names)
    issued = {alias for _, alias in table.pairs}
    if sent in issued:
        return
    assert table.canonical(sent) is None
    unknown = table.call_name(sent)
    assert unknown.startswith("?")
    assert is_provider_safe(unknown[1:])
    assert unknown not in issued
    assert unknown == table.call_name(sent)
    with pytest.raises(ValueError, match="invalid tool name"):
        create_tool(name=unknown, description="d", parameters=dict[str, object], execute=_never)


@given(st.text(st.characters(codec="ascii"), min_size=1, max_size=70) | registry_names)
def test_every_name_harness_tools_accepts_is_a_legal_canonical_name(name: str) -> None:
    try:
        create_tool(name=name, description="d", parameters=dict[str, object], execute=_never)
    except ValueError:
        return
    assert ToolNameAliases([name]).canonical(ToolNameAliases([name]).alias(name)) == name


@given(
    st.text(max_size=8),
    st.characters(categories=_REFUSED),
    st.text(max_size=8),
)
def test_a_name_with_an_invisible_or_control_character_is_refused(head: str, bad: str, tail: str) -> None:
    name = "fs" + head + bad + tail
    assert unicodedata.category(bad) in _REFUSED
    with pytest.raises(ToolNameAliasError) as caught:
        ToolNameAliases(["fs.read", name])
    assert (caught.value.code, caught.value.index) == (MODEL_TOOL_NAME_INVALID, 1)


# ------------------------------------------------------------------ the hostile cases, by example
@pytest.mark.parametrize("names", [["fs.read", "fs_read"], ["fs_read", "fs.read"]])
def test_a_safe_name_keeps_its_spelling_and_the_dotted_twin_takes_a_digest(names: list[str]) -> None:
    table = ToolNameAliases(names)
    assert table.alias("fs_read") == "fs_read"
    assert table.alias("fs.read") == "fs_read_" + digest("fs.read")
    assert table.canonical("fs_read") == "fs_read"
    assert table.canonical("fs_read_" + digest("fs.read")) == "fs.read"


def test_the_canonical_dotted_names_read_as_their_underscored_aliases() -> None:
    names = ["fs.read", "fs.list", "fs.write", "process.exec", "git.diff", "read_file", "echo"]
    assert aliases_of(ToolNameAliases(names)) == {
        "fs.read": "fs_read",
        "fs.list": "fs_list",
        "fs.write": "fs_write",
        "process.exec": "process_exec",
        "git.diff": "git_diff",
        "read_file": "read_file",
        "echo": "echo",
    }


def test_names_that_differ_only_outside_the_alphabet_get_distinct_aliases() -> None:
    assert ToolNameAliases(["a.b"]).alias("a.b") == "a_b"
    table = ToolNameAliases(["a.b", "a:b", "a b", "a..b"])
    assert aliases_of(table) == {name: "a_b_" + digest(name) for name in ["a.b", "a:b", "a b", "a..b"]}
    assert table.canonical("a_b") is None


def test_non_ascii_names_are_aliased_readably_where_letters_remain() -> None:
    fullwidth = "\uff46\uff53.read"  # "fs.read" in fullwidth letters
    table = ToolNameAliases(["café", "cafe", fullwidth, "fs.read", "读取", "读写"])
    assert table.alias("cafe") == "cafe"
    assert table.alias("café") == "caf_"
    assert table.alias(fullwidth) == "_read"
    assert table.alias("fs.read") == "fs_read"
    # Nothing readable is left of the two CJK names: a stem and each name's own digest.
    assert table.alias("读取") == "tool_" + digest("读取")
    assert table.alias("读写") == "tool_" + digest("读写")


def test_names_that_sanitize_to_nothing_readable_get_the_tool_stem_and_their_digest() -> None:
    table = ToolNameAliases(["...", "::", "-", "tool", "_.-"])
    assert table.alias("-") == "-"  # provider-safe as it is
    assert table.alias("tool") == "tool"
    for name in ("...", "::", "_.-"):
        assert table.alias(name) == "tool_" + digest(name)


def test_a_64_character_safe_name_is_kept_and_a_longer_one_is_shortened_with_its_digest() -> None:
    exactly = "a" * 64
    longer = "a" * 65
    table = ToolNameAliases([exactly, longer])
    assert table.alias(exactly) == exactly
    assert table.alias(longer) == "a" * 51 + "_" + digest(longer)
    assert len(table.alias(longer)) == 64


def test_two_long_names_that_share_their_first_64_characters_still_differ() -> None:
    shared = "process.exec." + "x" * 51
    first, second = shared + ".stdout", shared + ".stderr"
    table = ToolNameAliases([first, second])
    assert table.alias(first) != table.alias(second)
    for name in (first, second):
        assert table.alias(name) == readable_form(shared)[:51] + "_" + digest(name)


def test_a_name_equal_to_another_names_generated_alias_keeps_it_and_pushes_the_other_on() -> None:
    generated = "a_b_" + digest("a.b")
    table = ToolNameAliases(["a.b", "a:b", generated, generated + "-1"])
    assert table.alias(generated) == generated
    assert table.alias(generated + "-1") == generated + "-1"
    assert table.alias("a.b") == generated + "-2"
    assert table.alias("a:b") == "a_b_" + digest("a:b")
    assert table.canonical(generated + "-2") == "a.b"


def test_a_readable_form_equal_to_another_names_digest_alias_wins_over_the_digest() -> None:
    generated = "a_b_" + digest("a.b")
    dotted_twin = "a.b_" + digest("a.b")  # its readable form is ``generated``
    table = ToolNameAliases(["a.b", "a:b", dotted_twin])
    assert table.alias(dotted_twin) == generated
    assert table.alias("a.b") == generated + "-1"


def test_two_names_whose_digests_truly_collide_still_get_distinct_aliases_in_any_order() -> None:
    # A real 48-bit collision (found once with Brent's cycle search over SHA-256): the two
    # names share their stem and the first 12 hex digits of their digest, so both want the
    # same ``<stem>_<digest>``. The table must not rely on the odds of the hash.
    first, second = "P" * 52 + ".010cea6a4c49", "P" * 52 + ".aeadb7a09ea7"
    assert digest(first) == digest(second) == "cee235263545"
    expected = {first: "P" * 51 + "_cee235263545", second: "P" * 49 + "_cee235263545-1"}
    assert aliases_of(ToolNameAliases([first, second])) == expected
    assert aliases_of(ToolNameAliases([second, first])) == expected


def test_the_aliases_are_pinned_across_releases() -> None:
    # Providers cache prompts and models read the history by these spellings: a change here
    # is a change of contract, made on purpose.
    table = ToolNameAliases(["fs.read", "fs_read", "a.b", "a:b", "读取", "x" * 70])
    assert table.pairs == (
        ("fs.read", "fs_read_4074bc025755"),
        ("fs_read", "fs_read"),
        ("a.b", "a_b_2e7336dc8eba"),
        ("a:b", "a_b_6783a31eabf6"),
        ("读取", "tool_534cb3fa8fbf"),
        ("x" * 70, "x" * 51 + "_c71bd109227e"),
    )


# ------------------------------------------------------------------ lookups
def test_the_reverse_lookup_guesses_nothing() -> None:
    table = ToolNameAliases(["fs.read", "git.diff"])
    assert table.canonical("fs_read") == "fs.read"
    for sent in ("fs.read", "FS_READ", "fs_read ", "fs-read", "", "git_diff\n", "fs_read\x00"):
        assert table.canonical(sent) is None
    assert table.canonical(None) is None  # pyright: ignore[reportArgumentType]
    assert table.canonical(["fs_read"]) is None  # pyright: ignore[reportArgumentType]


def test_a_str_subclass_does_not_resolve() -> None:
    class Sneaky(str):
        __slots__ = ()

    table = ToolNameAliases(["fs.read"])
    assert table.canonical(Sneaky("fs_read")) is None
    with pytest.raises(ToolNameAliasError):
        table.alias(Sneaky("fs.read"))


def test_call_name_marks_an_invented_name_without_hiding_what_the_model_asked_for() -> None:
    table = ToolNameAliases(["fs.read"])
    assert table.call_name("fs_read") == "fs.read"
    assert table.call_name("fs_write") == "?fs_write"
    assert table.call_name("fs.read") == "?fs_read_" + digest("fs.read")
    assert table.call_name("multi_tool_use.parallel") == "?multi_tool_use_parallel_" + digest(
        "multi_tool_use.parallel"
    )
    assert table.call_name("") == "?tool_" + digest("")
    lone = table.call_name("\ud800")
    assert lone.startswith("?tool_")
    assert lone.isascii()
    assert len(table.call_name("z" * 10_000)) == 65
    with pytest.raises(ToolNameAliasError) as caught:
        table.call_name(b"fs_read")  # pyright: ignore[reportArgumentType]
    assert caught.value.code == MODEL_TOOL_NAME_INVALID


def test_alias_of_a_name_outside_the_table_is_a_typed_error() -> None:
    table = ToolNameAliases(["fs.read"])
    for name in ("fs_read", "git.diff", 3):
        with pytest.raises(ToolNameAliasError) as caught:
            table.alias(name)  # pyright: ignore[reportArgumentType]
        assert caught.value.code == MODEL_TOOL_NAME_UNKNOWN


# ------------------------------------------------------------------ what a canonical name may be
@pytest.mark.parametrize(
    "bad",
    [
        "",
        "   ",
        "\u3000",
        "x" * 257,
        "fs\x00read",
        "fs\nread",
        "fs\x1b[31mread",
        "fs\u200bread",
        "fs\u202eread",
        "fs\ufeffread",
        "fs\u2028read",
        "fs\ud800read",
        None,
        b"fs.read",
        7,
    ],
)
def test_an_invalid_canonical_name_is_refused_with_its_position(bad: object) -> None:
    with pytest.raises(ToolNameAliasError) as caught:
        ToolNameAliases(["fs.read", "git.diff", bad])  # pyright: ignore[reportArgumentType]
    assert (caught.value.code, caught.value.index) == (MODEL_TOOL_NAME_INVALID, 2)


def test_the_longest_legal_name_and_spaced_names_are_accepted() -> None:
    table = ToolNameAliases(["x" * 256, " fs read ", "fs\u00a0read"])
    assert len(table) == 3


def test_a_repeated_name_is_refused() -> None:
    with pytest.raises(ToolNameAliasError) as caught:
        ToolNameAliases(["fs.read", "git.diff", "fs.read"])
    assert (caught.value.code, caught.value.index) == (MODEL_TOOL_NAME_DUPLICATE, 2)


@pytest.mark.parametrize("names", ["fs.read", b"fs.read", 42, None])
def test_names_that_are_not_an_iterable_of_names_are_refused(names: object) -> None:
    with pytest.raises(ToolNameAliasError) as caught:
        ToolNameAliases(names)  # pyright: ignore[reportArgumentType]
    assert caught.value.code == MODEL_TOOL_NAME_INVALID


def test_any_iterable_of_names_builds_the_same_table() -> None:
    def generate() -> Iterator[str]:
        yield from ("fs.read", "fs.list")

    assert ToolNameAliases(generate()) == ToolNameAliases(("fs.read", "fs.list"))
    assert ToolNameAliases({"fs.read": 1, "fs.list": 2}) == ToolNameAliases(["fs.read", "fs.list"])
    assert len(ToolNameAliases([])) == 0


def test_the_table_is_immutable() -> None:
    table = ToolNameAliases(["fs.read"])
    with pytest.raises(AttributeError):
        setattr(table, "_pairs", ())  # noqa: B010 -- the very assignment a caller might try
    with pytest.raises(AttributeError):
        delattr(table, "_alias_of")
    with pytest.raises(AttributeError):
        setattr(table, "extra", 1)  # noqa: B010
    assert table.pairs == (("fs.read", "fs_read"),)
    assert repr(table) == "ToolNameAliases({'fs.read': 'fs_read'})"
    assert table != ToolNameAliases(["fs.read", "fs.list"])
    assert table != ToolNameAliases(["fs.list", "fs.read"]).pairs


def test_the_error_pickles_with_its_code_and_position() -> None:
    error = ToolNameAliasError(MODEL_TOOL_NAME_DUPLICATE, "tool name 'x' is given twice", index=4)
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), copy.code, copy.message, copy.index) == (
        ToolNameAliasError,
        MODEL_TOOL_NAME_DUPLICATE,
        "tool name 'x' is given twice",
        4,
    )


# ------------------------------------------------------------------ through the runtime
async def _never(params: object, context: object = None) -> object:
    raise AssertionError("this tool must not run")


def _tool_events(events: list[Event]) -> list[tuple[str, str]]:
    return [(e.type, d(e).tool) for e in events if e.type in ("tool.call", "tool.result")]


async def test_an_issued_alias_reaches_its_tool_even_when_another_tool_has_its_spelling() -> None:
    ran: list[object] = []

    async def write(params: object, context: object = None) -> object:
        ran.append(params)
        return "written"

    # ``fs_write`` is registered but not shown (unbounded), so the table gives ``fs_write``
    # to ``fs.write``: the call must reach ``fs.write``, never the namesake.
    namesake = create_tool(name="fs_write", description="d", parameters=dict[str, object], execute=_never)
    tools = registry(pure_tool("fs.write", write), namesake)
    table = ToolNameAliases(["fs.write"])
    sent = table.alias("fs.write")
    assert sent == "fs_write"
    model = FakeModel([tool_turn(("m1", table.call_name(sent), {"text": "x"})), ScriptedTurn(content="ok")])
    events, error = await drain(MinimalAgentRuntime().run(make_input(model, tools=tools)))
    assert error is None
    assert [tool.name for tool in model.requests[0].tools or ()] == [name for name, _ in table.pairs]
    assert ran == [{"text": "x"}]
    assert ("tool.call", "fs.write") in _tool_events(events)
    assert "fs_write" not in {tool for _, tool in _tool_events(events)}


async def test_an_invented_name_is_an_unknown_tool_even_when_a_registered_tool_has_that_spelling() -> None:
    namesake = create_tool(name="fs_read", description="d", parameters=dict[str, object], execute=_never)

    async def write(params: object, context: object = None) -> object:
        return "written"

    table = ToolNameAliases(["fs.write"])
    assert table.canonical("fs_read") is None

    async def run_with(name: str) -> list[Event]:
        tools = registry(pure_tool("fs.write", write), namesake)
        model = FakeModel([tool_turn(("m1", name, {})), ScriptedTurn(content="ok")])
        events, error = await drain(MinimalAgentRuntime().run(make_input(model, tools=tools)))
        assert error is None
        return events

    marked = await run_with(table.call_name("fs_read"))
    assert _tool_events(marked) == [("tool.call", "?fs_read"), ("tool.result", "?fs_read")]
    assert [d(e).error.code for e in marked if e.type == "tool.result"] == ["TOOL_NOT_FOUND"]
    # Negative control: passed through raw, the invented name reaches the registered
    # namesake, which only the policy gate then stops.
    raw = await run_with("fs_read")
    assert "policy.decision" in types(raw)
    assert ("tool.call", "fs_read") in _tool_events(raw)
