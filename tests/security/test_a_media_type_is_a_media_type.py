"""A file's media_type is `type/subtype` with optional parameters, at most 255 characters.

A 1 MB media_type was published and handed to every MCP client reading the file as its
resource's mimeType. Publish now refuses one that is not a media type, naming the file and
without repeating a long value; tool_version_files holds the same rule.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from tests.security.publishing import Publisher, publishing, script


@pytest.fixture
def publisher(database_url: str) -> Iterator[Publisher]:
    with publishing(database_url) as p:
        yield p


def test_a_1_mb_media_type_is_refused_naming_the_file(publisher: Publisher) -> None:
    message = publisher.refusal(publisher.manifest(), [script(media_type="text/" + "x" * 1024 * 1024)])
    assert "files[1].media_type: 1048581 characters starting" in message
    assert 'is not a media type such as "text/plain"' in message
    assert len(message) < 1000


@pytest.mark.parametrize(
    "media_type", ["", "text", "text/", "/plain", "text/plain\nX-Evil: 1", "a b/c", "text/" + "p" * 128]
)
def test_what_is_no_media_type_is_refused(publisher: Publisher, media_type: str) -> None:
    assert "files[1].media_type:" in publisher.refusal(publisher.manifest(), [script(media_type=media_type)])


@pytest.mark.parametrize(
    "media_type",
    ["text/x-shellscript", "application/vnd.api+json", 'text/plain; charset="utf-8"', "text/markdown;variant=GFM"],
)
def test_media_types_are_published(publisher: Publisher, media_type: str) -> None:
    assert publisher.publish(publisher.manifest(), [script(media_type=media_type)])["created"] is True


def test_the_table_holds_the_rule_too(publisher: Publisher) -> None:
    publisher.admin()
    version = publisher.publish(publisher.manifest(version="2.0.0"))
    version_id = publisher.one(
        "select v.id from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = %s", version["tool_id"]
    )
    with pytest.raises(psycopg.errors.CheckViolation, match="media_type_shape"), publisher.conn.transaction():
        publisher.conn.execute(
            "insert into tool_version_files (version_id, path, media_type, sha256, size_bytes, content_text)"
            " values (%s, 'x.txt', %s, encode(sha256('x'), 'hex'), 1, 'x')",
            (version_id, "y" * 300),
        )
