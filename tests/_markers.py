"""The `db` marker, set by itself: a test needs the stack's database when it asks for a fixture
that does (directly or through another fixture), so no one has to remember a marker.
`make test-fast` runs the rest (`pytest -m "not db"`) in seconds; `make test` runs everything.
A test that reaches the database some other way says so with `pytestmark = pytest.mark.db`.

Loaded from pyproject's addopts (`-p tests._markers`), apart from conftest.py."""

from __future__ import annotations

import pytest

# the session fixtures every database fixture stands on (tests/conftest.py)
DATABASE_FIXTURES = frozenset({"database_url", "runner_database_url"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "db: needs the stack's database (set from the fixtures a test asks for)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if DATABASE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.db)
