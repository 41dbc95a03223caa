"""The SSE parser: the WHATWG interpretation rules, any chunking, strict UTF-8, bounded memory."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness_models import MODEL_STREAM_INVALID, MODEL_STREAM_TOO_LARGE, ModelError
from harness_models._sse import SseParser
from harness_models._wire import SseEvent


def parse(chunks: list[bytes], **limits: int) -> list[SseEvent]:
    parser = SseParser(**limits)
    events: list[SseEvent] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    return events


def test_data_lines_are_joined_and_the_event_type_defaults_to_message() -> None:
    assert parse([b"data: one\ndata:two\ndata\n\n"]) == [SseEvent(data="one\ntwo\n")]


def test_only_one_leading_space_is_removed_and_a_field_without_colon_is_empty() -> None:
    events = parse([b"event:  spaced\ndata:  two spaces\n\n"])
    assert events == [SseEvent(event=" spaced", data=" two spaces")]


@pytest.mark.parametrize("ending", [b"\r\n", b"\n", b"\r"])
def test_every_line_ending_ends_a_line(ending: bytes) -> None:
    body = ending.join([b"event: delta", b"data: x", b"", b"data: y", b"", b""])
    assert parse([body]) == [SseEvent(event="delta", data="x"), SseEvent(data="y")]


def test_a_cr_ending_one_chunk_and_an_lf_starting_the_next_are_one_line_end() -> None:
    # Were the LF taken as a second line end, the blank line would dispatch "a" early and
    # the "b" line would form an event of its own.
    assert parse([b"data: a\r", b"\ndata: b\r\n\r\n"]) == [SseEvent(data="a\nb")]


def test_comments_and_unknown_fields_are_ignored_and_retry_is_kept() -> None:
    parser = SseParser()
    events = parser.feed(b": ping\nfoo: bar\nretry: 2500\nretry: soon\ndata: x\n\n")
    assert events == [SseEvent(data="x")]
    assert parser.retry_ms == 2500


def test_an_event_without_data_is_not_dispatched_and_its_type_does_not_leak() -> None:
    assert parse([b"event: ping\n\ndata: x\n\n"]) == [SseEvent(data="x")]
    # An empty data line is data: the event is dispatched with empty data.
    assert parse([b"data\n\n"]) == [SseEvent(data="")]


def test_the_last_event_id_persists_and_an_id_with_nul_is_ignored() -> None:
    events = parse([b"id: 7\ndata: a\n\ndata: b\n\nid: 8\x00\ndata: c\n\nid\ndata: d\n\n"])
    assert [event.id for event in events] == ["7", "7", "7", None]


def test_a_leading_bom_is_dropped_even_split_across_chunks_but_only_at_the_start() -> None:
    assert parse([b"\xef", b"\xbb", b"\xbfdata: x\n\n"]) == [SseEvent(data="x")]
    # A second BOM is part of the first line's field name, which is then unknown.
    assert parse([b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\ndata: y\n\n"]) == [SseEvent(data="y")]


def test_a_character_split_across_chunks_is_decoded_whole() -> None:
    body = "data: Grüße 🌍\n\n".encode()
    for cut in range(1, len(body)):
        assert parse([body[:cut], body[cut:]]) == [SseEvent(data="Grüße 🌍")]


@pytest.mark.parametrize("bad", [b"data: \xff\n\n", b"data: \xc3\n\n", b"event: \xed\xa0\x80\n", b": \xfe\n"])
def test_invalid_utf8_is_a_typed_error(bad: bytes) -> None:
    with pytest.raises(ModelError) as caught:
        parse([bad])
    assert caught.value.code == MODEL_STREAM_INVALID


def test_a_partial_line_over_the_limit_is_refused_before_its_end_arrives() -> None:
    parser = SseParser(max_line_bytes=64)
    parser.feed(b"data: " + b"x" * 50)
    with pytest.raises(ModelError) as caught:
        parser.feed(b"x" * 50)
    assert caught.value.code == MODEL_STREAM_TOO_LARGE


def test_a_complete_line_over_the_limit_is_refused() -> None:
    with pytest.raises(ModelError, match="line is longer") as caught:
        parse([b"data: " + b"x" * 100 + b"\n"], max_line_bytes=64)
    assert caught.value.code == MODEL_STREAM_TOO_LARGE


def test_an_event_over_the_limit_is_refused_though_each_line_fits() -> None:
    with pytest.raises(ModelError, match="more than 100 bytes") as caught:
        parse([b"data: 0123456789\n" * 20], max_event_bytes=100)
    assert caught.value.code == MODEL_STREAM_TOO_LARGE
    # The same lines spread over events are fine.
    assert len(parse([b"data: 0123456789\n\n" * 20], max_event_bytes=100)) == 20


def test_at_boundary_tells_a_stream_cut_inside_an_event() -> None:
    parser = SseParser()
    parser.feed(b"data: x\n\n")
    assert parser.at_boundary
    parser.feed(b"data: y\n")
    assert not parser.at_boundary
    parser.feed(b"\n")
    assert parser.at_boundary
    parser.feed(b"data: partial")
    assert not parser.at_boundary


# ------------------------------------------------------------------ any chunking, same events
_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x00"), max_size=20)
_NAME = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x00:"), max_size=8)
_EVENTS = st.lists(
    st.tuples(
        st.one_of(st.none(), _NAME), st.lists(_TEXT, min_size=1, max_size=3), st.one_of(st.none(), _NAME)
    ),
    max_size=6,
)


def _serialise(
    events: list[tuple[str | None, list[str], str | None]], endings: list[bytes], bom: bool
) -> tuple[bytes, list[SseEvent]]:
    lines: list[str] = []
    expected: list[SseEvent] = []
    last_id: str | None = None
    for event_type, data, event_id in events:
        lines.append(": keep-alive")
        if event_type is not None:
            lines.append(f"event: {event_type}")
        if event_id is not None:
            lines.append(f"id: {event_id}")
            last_id = event_id or None
        lines.extend(f"data: {line}" for line in data)
        lines.append("")
        expected.append(SseEvent(event=event_type or "message", data="\n".join(data), id=last_id))
    out = bytearray(b"\xef\xbb\xbf" if bom else b"")
    previous = b""
    for index, line in enumerate(lines):
        ending = endings[index % len(endings)]
        if previous == b"\r" and not line and ending == b"\n":
            ending = b"\r\n"  # CR then a bare LF would read as one CRLF line end
        out += line.encode() + ending
        previous = ending
    return bytes(out), expected


@given(
    events=_EVENTS,
    endings=st.lists(st.sampled_from([b"\r\n", b"\n", b"\r"]), min_size=1, max_size=4),
    bom=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_any_split_of_a_valid_stream_yields_the_same_events(
    events: list[tuple[str | None, list[str], str | None]], endings: list[bytes], bom: bool, cuts: list[int]
) -> None:
    body, expected = _serialise(events, endings, bom)
    assert parse([body]) == expected
    points = sorted({min(cut, len(body)) for cut in cuts})
    chunks = [body[start:end] for start, end in zip([0, *points], [*points, len(body)], strict=True)]
    assert parse(chunks) == expected
    assert parse([bytes([byte]) for byte in body]) == expected


def _reference(body: bytes) -> list[tuple[str, str]]:
    """WHATWG's event-stream interpretation, written out plainly over the whole body."""
    text = body.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    events: list[tuple[str, str]] = []
    data: list[str] = []
    kind = ""
    for line in text.split("\n")[:-1]:  # the last piece never ended: not a line
        if not line:
            if data:
                events.append((kind or "message", "\n".join(data)))
            data, kind = [], ""
            continue
        if line.startswith(":"):
            continue
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            kind = value
    return events


_LINES = st.one_of(
    st.text(
        alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"), max_size=12
    ).map(lambda value: f"data: {value}"),
    st.text(alphabet="ab é", max_size=5).map(lambda value: f"data:{value}"),
    st.sampled_from(["data", "data:", "data:  two spaces", "event: tool", "event:x", ": ping", "id: 7", ""]),
)


@given(st.lists(_LINES, max_size=30), st.sampled_from([b"\n", b"\r\n", b"\r"]), st.integers(1, 9))
def test_the_parser_agrees_with_a_plain_reference(lines: list[str], ending: bytes, size: int) -> None:
    body = ending.join(line.encode() for line in [*lines, "", ""])
    chunks = [body[index : index + size] for index in range(0, len(body), size)]
    assert [(event.event, event.data) for event in parse(chunks)] == _reference(body)
