"""The stream reader of the http_client primitive on bodies cut at awkward places: an event
split anywhere (inside a CRLF, inside a UTF-8 character) reads as the same events."""

from __future__ import annotations

import pytest

from runner.primitives.http_stream import _Reader

BODY = (
    ': ping\r\n\r\nevent: greet\r\ndata: {"text": "h\xe9llo"}\r\nid: 7\r\n\r\n'
    "data: line one\r\ndata: line two\r\n\r\ndata: last"
).encode()
EXPECTED = [
    {"event": "greet", "data": {"text": "h\xe9llo"}, "id": "7"},
    {"event": "message", "data": "line one\nline two", "id": "7"},
    {"event": "message", "data": "last", "id": "7"},
]


@pytest.mark.parametrize("cut", range(1, len(BODY)))
def test_an_event_stream_cut_anywhere_reads_the_same(cut: int) -> None:
    told: list[str] = []
    reader = _Reader("sse", None, told.append)
    reader.feed(BODY[:cut])
    reader.feed(BODY[cut:])
    reader.close()
    assert reader.items == EXPECTED
    assert told == ['greet: {"text": "h\xe9llo"}', "line one\nline two", "last"]


def test_lines_skip_blank_ones_and_parse_json() -> None:
    reader = _Reader("lines", "END", None)
    assert not reader.feed(b'{"a": 1}\n\nplain text\r\n')
    assert reader.feed(b"END\nnever read\n")
    assert reader.items == [{"a": 1}, "plain text"]
