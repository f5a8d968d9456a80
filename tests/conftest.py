"""Shared fixtures: the real database the stack brought up (`make db`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATABASE_URL = "postgresql://postgres:postgres@127.0.0.1:54322/postgres"


@pytest.fixture(scope="session")
def database_url() -> str:
    url = os.environ.get("KIWI_DATABASE_URL", DEFAULT_DATABASE_URL)
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            conn.execute("select 1 from public.tools limit 1")
    except psycopg.Error as exc:
        pytest.fail(f"the registry database at {url} is not ready ({exc}); run `make db` first")
    return url


@pytest.fixture
def conn(database_url: str) -> Iterator[psycopg.Connection]:
    """An admin connection in autocommit mode, as the dashboard SQL editor has."""
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection
