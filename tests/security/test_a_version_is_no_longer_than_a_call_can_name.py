"""A version is at most 128 characters, as every call names it.

A 100,000-character pre-release version was published and became latest, and then no call
could run it: check_call, run records and audit rows name a version of at most 128
characters. Publish now refuses it, naming the field and the maximum, without repeating the
version; tool_versions holds the same rule.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from tests.security.publishing import Publisher, publishing


@pytest.fixture
def publisher(database_url: str) -> Iterator[Publisher]:
    with publishing(database_url) as p:
        yield p


def test_a_100k_prerelease_is_refused_naming_the_field_and_the_maximum(publisher: Publisher) -> None:
    message = publisher.refusal(publisher.manifest(version="1.0.0-" + "a" * 100_000))
    assert "version: 100006 characters, more than the maximum of 128" in message
    assert len(message) < 1000, "the version is not repeated"


def test_129_characters_are_refused_and_128_published(publisher: Publisher) -> None:
    assert "more than the maximum of 128" in publisher.refusal(publisher.manifest(version="1.0.0-" + "b" * 123))
    answer = publisher.publish(publisher.manifest(version="1.0.0-" + "b" * 122))
    assert answer["created"] is True and answer["is_latest"] is True


def test_a_numeric_prerelease_identifier_over_20_digits_is_refused(publisher: Publisher) -> None:
    """semver_key orders them padded to 20 digits: a longer one would be cut and could tie."""
    message = publisher.refusal(publisher.manifest(version="1.0.0-rc." + "9" * 21))
    assert "numeric pre-release identifier of more than 20 digits" in message
    assert publisher.publish(publisher.manifest(version="1.0.0-rc." + "9" * 20))["created"] is True


def test_the_table_holds_the_rule_too(publisher: Publisher) -> None:
    publisher.admin()
    tool = publisher.one(
        "insert into tools (namespace, tool_id, tool_type, name) values (%s, 'raw', 'knowledge', 'raw') returning id",
        publisher.ns,
    )
    long = "1.0.0-" + "c" * 200
    with pytest.raises(psycopg.errors.CheckViolation, match="version_length"), publisher.conn.transaction():
        publisher.conn.execute(
            "insert into tool_versions (tool_uuid, version, manifest, content_hash) values (%s, %s, %s, %s)",
            (tool, long, f'{{"tool_type": "knowledge", "version": "{long}"}}', "0" * 64),
        )
