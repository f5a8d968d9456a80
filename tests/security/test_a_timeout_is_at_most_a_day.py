"""A config's timeout is at most 86400 seconds, in the registry and in the runner alike.

`timeout: 1e308` was published. Publish and preview now refuse a numeric `timeout` at any
depth of a config that is not more than 0 and at most a day, naming its path, after old
spellings are made canonical; the runner refuses the same (MAX_TIMEOUT_S), with the same
number.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner import ConfigError
from runner.primitives.process import MAX_TIMEOUT_S
from runner.primitives.subprocess import seconds
from tests.security.publishing import Publisher, publishing


@pytest.fixture
def publisher(database_url: str) -> Iterator[Publisher]:
    with publishing(database_url) as p:
        yield p


@pytest.mark.parametrize("timeout", [1e308, 86401, 0, -5])
def test_a_timeout_out_of_range_is_refused_naming_its_path(publisher: Publisher, timeout: float) -> None:
    message = publisher.refusal(publisher.manifest(config={"timeout": timeout}))
    assert "config.timeout:" in message
    assert "a timeout is more than 0 and at most 86400 (24 hours)" in message


def test_an_old_spelling_is_checked_as_what_it_becomes(publisher: Publisher) -> None:
    assert "config.timeout:" in publisher.refusal(publisher.manifest(config={"timeout_s": 1e308}))


def test_a_nested_timeout_is_refused_too(publisher: Publisher) -> None:
    rules = {"validation": {"rules": [{"kind": "syntax_check", "command": ["true"], "timeout": 1e9}]}}
    message = publisher.refusal(publisher.manifest(config=rules))
    assert "config.validation.rules[1].timeout:" in message


def test_a_day_is_published(publisher: Publisher) -> None:
    assert publisher.publish(publisher.manifest(config={"timeout": 86400}))["created"] is True


def test_preview_refuses_it_alike(publisher: Publisher) -> None:
    with pytest.raises(psycopg.Error) as raised, publisher.conn.transaction():
        publisher.conn.execute(
            "select preview_execution_plan(%s, %s)",
            (Jsonb(publisher.manifest(config={"timeout": 1e308})), Jsonb([{"path": "run.sh", "content_text": "x"}])),
        )
    assert raised.value.sqlstate == "22023"
    assert "config.timeout:" in str(raised.value)


def test_the_runner_holds_the_same_maximum() -> None:
    assert MAX_TIMEOUT_S == 86400
    assert seconds({"timeout": 86400}, "timeout", 1.0, "t") == 86400
    with pytest.raises(ConfigError, match="at most 86400"):
        seconds({"timeout": 1e308}, "timeout", 1.0, "t")
