"""Redaction for process boundaries (kernel.md §2.6)."""

from __future__ import annotations

import copy
from typing import Final, cast

import kernel_event_examples as examples
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness_kernel._json import freeze_json
from harness_kernel.events import (
    REDACTED,
    ToolCallData,
    create_event,
    redact_event,
    redact_value,
    serialize_event,
)
from harness_kernel.events import _redaction as _redaction_module
from harness_kernel.events._redaction import REDACTION_MAX_DEPTH


def test_constants() -> None:
    assert REDACTED == "[REDACTED]"
    assert REDACTION_MAX_DEPTH == 64


# ------------------------------------------------------------------ the six patterns
STRINGS: Final = (
    # 1 Bearer tokens, any case
    ("use Bearer abc.DEF_~+/=-123 now", "use Bearer [REDACTED] now"),
    ("bearer\txyz", "bearer\t[REDACTED]"),
    # 2 provider keys in env-style assignments
    ("OPENAI_API_KEY=sk-abc123", "OPENAI_API_KEY=[REDACTED]"),
    ("aws_secret_access_key = wJalr", "aws_secret_access_key = [REDACTED]"),
    ("ANTHROPIC_AUTH_TOKEN= 'x'", "ANTHROPIC_AUTH_TOKEN= '[REDACTED]'"),
    # 3 sk- keys: case-sensitive, at least 12 characters, at a word boundary
    ("key sk-proj-abcdefghijklmnop end", "key sk-proj-[REDACTED] end"),
    ("sk-svcacct-ABCDEFGHIJKL_-", "sk-svcacct-[REDACTED]"),
    ("sk-abcdefghijkl", "sk-[REDACTED]"),
    ("sk-short", "sk-short"),
    ("SK-ABCDEFGHIJKLMNOP", "SK-ABCDEFGHIJKLMNOP"),
    ("xsk-abcdefghijklmnop", "xsk-abcdefghijklmnop"),
    # 4 Basic authorization (pattern 6 then takes the scheme word too)
    ("Proxy-Authorization: Basic dXNlcjpwYXNz", "Proxy-Authorization: [REDACTED] [REDACTED]"),
    # 5 cookies up to the end of the line
    ("Cookie: session=abc; theme=dark\nnext", "Cookie: [REDACTED]\nnext"),
    ("set-cookie:a=b", "set-cookie:[REDACTED]"),
    # 6 key/value secrets
    ('password="hunter2"', 'password="[REDACTED]"'),
    ("client_secret: abc, other", "client_secret: [REDACTED], other"),
    ("?access_token=abc&x=1", "?access_token=[REDACTED]&x=1"),
    ('{"api-key": "v"}', '{"api-key": "[REDACTED]"}'),
    ("X_API_KEY:abc;", "X_API_KEY:[REDACTED];"),
    ("PASSWD=pw}", "PASSWD=[REDACTED]}"),
    # re.ASCII: NBSP is not whitespace and é is not a word character
    ("token=\u00a0abc", "token=[REDACTED]"),
    ("éBearer abc", "éBearer [REDACTED]"),
    # nothing to redact
    ("plain text with a key and tokens", "plain text with a key and tokens"),
    ("", ""),
)


@pytest.mark.parametrize(("text", "expected"), STRINGS)
def test_secret_patterns_keep_the_prefix_and_replace_the_secret(text: str, expected: str) -> None:
    assert redact_value(text) == expected


def test_patterns_apply_in_order() -> None:
    # Pattern 1 redacts the token; pattern 6 then sees "Authorization:" and takes "Bearer".
    assert redact_value("Authorization: Bearer abc") == "Authorization: [REDACTED] [REDACTED]"


# ------------------------------------------------------------------ keys
SENSITIVE_KEYS: Final = (
    "Authorization",
    "proxy-authorization",
    "Cookie",
    "set_cookie",
    "credential",
    "Credentials",
    "x-api-key",
    "OPENAI_API_KEY",
    "private_key",
    "secretKey",
    "access_token",
    "fencingToken",
    "clientSecret",
    "db_password",
    "PASSWD",
    "token",
)
PLAIN_KEYS: Final = ("key", "tokens", "tokenizer", "author", "passwordHint", "cookies", "sessionId", "")


@pytest.mark.parametrize("key", SENSITIVE_KEYS)
def test_sensitive_keys_have_their_whole_value_redacted(key: str) -> None:
    for value in ("plain", 42, None, {"nested": "x"}, ["x"]):
        assert redact_value({key: value, "other": "x"}) == {key: REDACTED, "other": "x"}


@pytest.mark.parametrize("key", PLAIN_KEYS)
def test_other_keys_keep_their_values_which_are_redacted_recursively(key: str) -> None:
    assert redact_value({key: {"apiKey": "k", "v": 1}}) == {key: {"apiKey": REDACTED, "v": 1}}


def test_non_string_keys_are_kept() -> None:
    assert redact_value({1: "Bearer x", None: 2}) == {1: "Bearer [REDACTED]", None: 2}


# ------------------------------------------------------------------ structure
def test_containers_become_plain_dicts_and_lists_and_other_values_pass_through() -> None:
    marker = object()
    value = {"t": ("a", "b"), "f": freeze_json({"k": ["Bearer x"]}), "o": marker, "n": 1.5, "b": b"Bearer x"}
    result = redact_value(value)
    assert result == {
        "t": ["a", "b"],
        "f": {"k": ["Bearer [REDACTED]"]},
        "o": marker,
        "n": 1.5,
        "b": b"Bearer x",
    }
    assert isinstance(result, dict)
    fields = cast("dict[str, object]", result)
    assert type(fields["t"]) is list
    assert type(fields["f"]) is dict
    assert fields["o"] is marker


def test_the_input_is_left_untouched() -> None:
    value = {"password": "p", "list": ["Bearer abc", {"token": 1}], "deep": {"cookie": "c"}}
    before = copy.deepcopy(value)
    result = redact_value(value)
    assert value == before
    assert result is not value


def test_containers_at_depth_64_are_replaced() -> None:
    value: object = "leaf"
    for _ in range(REDACTION_MAX_DEPTH + 1):  # containers at depths 0..64
        value = [value]
    result = redact_value(value)
    for _ in range(REDACTION_MAX_DEPTH):
        assert isinstance(result, list)
        items = cast("list[object]", result)
        assert len(items) == 1
        result = items[0]
    assert result == REDACTED


def test_twenty_thousand_deep_input_is_handled_without_recursion_error() -> None:
    value: object = "Bearer secret"
    for index in range(20_000):
        value = [value] if index % 2 else {"k": value}
    result = redact_value(value)
    assert type(result) is list
    assert "Bearer secret" not in repr(cast("object", result))


def test_cycles_and_shared_containers_are_replaced_on_the_second_visit() -> None:
    cyclic: list[object] = ["x"]
    cyclic.append(cyclic)
    assert redact_value(cyclic) == ["x", REDACTED]
    looped: dict[str, object] = {"a": 1}
    looped["self"] = looped
    assert redact_value(looped) == {"a": 1, "self": REDACTED}
    shared = {"x": 1}
    assert redact_value([shared, shared]) == [{"x": 1}, REDACTED]


# ------------------------------------------------------------------ redact_event
def test_redact_event_returns_a_new_schema_valid_event_and_leaves_the_input_alone() -> None:
    event = create_event(
        "tool.call",
        {
            "callId": "c",
            "tool": "http",
            "input": {"headers": {"Authorization": "Basic x"}, "url": "u?token=abc"},
        },
        actor="kernel",
    )
    before = serialize_event(event)
    redacted = redact_event(event)
    assert serialize_event(event) == before
    assert redacted is not event
    assert isinstance(redacted.data, ToolCallData)
    assert redacted.data.input == {"headers": {"Authorization": REDACTED}, "url": "u?token=[REDACTED]"}
    assert (redacted.event_id, redacted.at, redacted.actor, redacted.type) == (
        event.event_id,
        event.at,
        event.actor,
        event.type,
    )
    assert redact_event(redacted) == redacted


@pytest.mark.parametrize(
    ("label", "event_type", "data"), examples.EXAMPLES, ids=[e[0] for e in examples.EXAMPLES]
)
def test_redact_event_keeps_every_catalogue_example_valid(
    label: str, event_type: str, data: dict[str, object]
) -> None:
    event = create_event(event_type, data, event_id="evt-1", at=examples.AT)  # pyright: ignore[reportArgumentType]

    # fencingToken ends with "token", but an integer holds no text and the schema types it,
    # so redact_event keeps it (a documented deviation; redact_value would replace it).
    assert redact_event(event) == event


def test_redact_value_still_replaces_a_number_under_a_sensitive_key() -> None:
    assert redact_value({"fencingToken": 3, "apiKey": 7}) == {"fencingToken": REDACTED, "apiKey": REDACTED}


def test_redact_event_replaces_text_under_a_sensitive_key_in_json_fields() -> None:
    event = create_event(
        "tool.call",
        {"callId": "c1", "tool": "fetch", "input": {"accessToken": "abc", "retries": 2, "password": 5}},
        event_id="evt-1",
        at=examples.AT,
    )

    redacted = redact_event(event)

    assert redacted.data.input == {"accessToken": REDACTED, "retries": 2, "password": 5}  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]


def test_redact_event_refuses_what_is_not_exactly_an_event() -> None:
    with pytest.raises(TypeError):
        redact_event({"v": 1})  # pyright: ignore[reportArgumentType]


# ------------------------------------------------------------------ the keyword prefilter (issue #21)
_FRAGMENTS = st.sampled_from(
    [
        "Bearer ",
        "bearer\t",
        "OPENAI_API_KEY=",
        "aws_secret=",
        "AZURE_OPENAI_TOKEN = ",
        "sk-",
        "sk-proj-",
        "SK-",
        "Authorization: Basic ",
        "proxy-authorization:basic ",
        "Cookie: ",
        "set-cookie:",
        "api_key:",
        "x-api-key=",
        "client_secret=",
        "password=",
        "PASSWD:",
        "token=",
        "\u212a",  # the Kelvin sign: not an ASCII "k"
        "abcdefghijklmnop0123",
        "=",
        ":",
        " ",
        '"',
        "\n",
        "é",
    ]
)


def _six_substitutions(text: str) -> str:
    for pattern in _redaction_module._SECRET_PATTERNS:  # pyright: ignore[reportPrivateUsage]
        text = pattern.sub(_redaction_module._KEEP_PREFIX, text)  # pyright: ignore[reportPrivateUsage]
    return text


@settings(max_examples=600, deadline=None)
@given(st.lists(st.one_of(_FRAGMENTS, st.text(max_size=5)), max_size=12).map("".join))
def test_the_keyword_prefilter_never_changes_what_redaction_returns(text: str) -> None:
    assert _redaction_module.redact_string(text) == _six_substitutions(text)


_KEYS = st.sampled_from(["callId", "input", "path", "apiKey", "x-api-key", "Cookie", "fencingToken", "note"])
_LEAVES = st.one_of(
    st.lists(st.one_of(_FRAGMENTS, st.text(max_size=4)), max_size=4).map("".join),
    st.integers(),
    st.none(),
    st.booleans(),
)
_DATA = st.recursive(
    _LEAVES,
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(_KEYS, children, max_size=3)),
    max_leaves=12,
)


@settings(max_examples=500, deadline=None)
@given(_DATA)
def test_the_scan_says_no_change_only_when_redaction_changes_nothing(value: object) -> None:
    scan = _redaction_module._Redactor(keep_non_text=True)  # pyright: ignore[reportPrivateUsage]
    redactor = _redaction_module._Redactor(keep_non_text=True)  # pyright: ignore[reportPrivateUsage]
    redacted = redactor.redact(value, 0)
    if not scan.may_change(value, 0):
        assert not redactor.changed
        assert redacted == value


def test_the_scan_sees_a_shared_container_and_a_sensitive_key() -> None:
    shared = freeze_json({"a": "b"})
    scan = _redaction_module._Redactor(keep_non_text=True)  # pyright: ignore[reportPrivateUsage]
    assert scan.may_change([shared, shared], 0)
    scan = _redaction_module._Redactor(keep_non_text=True)  # pyright: ignore[reportPrivateUsage]
    assert scan.may_change({"apiKey": "x"}, 0)
    scan = _redaction_module._Redactor(keep_non_text=True)  # pyright: ignore[reportPrivateUsage]
    assert not scan.may_change({"fencingToken": 3, "note": "plain words"}, 0)
