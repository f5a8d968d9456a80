"""Shared fixtures: the real database the stack brought up (`make db`), and the settings and
runners the tests build on it (`local_settings`, `make_settings`, `make_runner`, `runner`)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner import Settings
from runner.testing.http_serving import runner_url, stack_url

if TYPE_CHECKING:  # loaded by the fixtures that use them, so collecting the suite stays quick
    from runner import Principal, Runner

ROOT = Path(__file__).resolve().parent.parent
STACK = ROOT / "scripts" / "stack"
# stack_url: the database the suite runs on (the stack's superuser, with which fixtures create
# and delete data as the dashboard's SQL editor would); runner_url: the runner's login on it
# (supabase/local_runner_login.sql), which `kiwi` itself logs in with by default.
#
# Unless KIWI_DATABASE_URL names one, that database is the suite's own on the stack's cluster
# (`kiwi_test`, made and kept current by `scripts/stack test-up`), never the default `postgres`
# database the demo and the user's own kiwi use: no test deletes or changes what a user made.
OWN_DATABASE = pytest.StashKey[bool]()
NOT_READY = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """Point the whole run, and every process it starts, at the suite's own database."""
    own = not os.environ.get("KIWI_DATABASE_URL")
    config.stash[OWN_DATABASE] = own
    if own:
        done = subprocess.run([str(STACK), "test-url"], capture_output=True, text=True, timeout=30)
        if done.returncode == 0:
            os.environ["KIWI_DATABASE_URL"] = done.stdout.strip()
            os.environ.pop("KIWI_RUNNER_DATABASE_URL", None)
        else:
            config.stash[NOT_READY] = done.stderr.strip()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build or refresh the suite's own database when a selected test needs a database."""
    config = session.config
    if not config.stash[OWN_DATABASE] or NOT_READY in config.stash:
        return
    if any(item.get_closest_marker("db") for item in session.items):
        done = subprocess.run([str(STACK), "test-up"], capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            config.stash[NOT_READY] = done.stderr.strip()


@pytest.fixture(scope="session")
def database_url(pytestconfig: pytest.Config) -> str:
    if NOT_READY in pytestconfig.stash:
        pytest.fail(f"the suite's own database is not ready: {pytestconfig.stash[NOT_READY]}")
    url = stack_url()
    try:
        with psycopg.connect(url, connect_timeout=5) as conn:
            conn.execute("select 1 from public.tools limit 1")
    except psycopg.Error as exc:
        pytest.fail(
            f"the registry database at {url} is not ready ({exc}); run `make db` first, or set "
            "KIWI_DB_PORT to the port your stack runs on"
        )
    local_stack_parts(url)
    return url


# What scripts/stack adds to a database after `supabase db reset`, and a query that finds it there.
LOCAL_PARTS = (
    ("local_runner_login.sql", "select 1 from pg_roles where rolname = 'kiwi_runner' and rolcanlogin"),
    ("local_owner.sql", "select 1 from public.namespaces where namespace = 'local'"),
)


def local_stack_parts(url: str) -> list[str]:
    """Put in what the suite needs of the local stack when a plain `supabase db reset` left it out
    (the runner's login and the local owner's namespace: supabase/local_*.sql, which scripts/stack
    applies and no hosted project ever receives, so they are not in seed.sql). Each file is
    applied only when what it makes is missing; returns the files applied."""
    applied = []
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as connection:
        for name, present in LOCAL_PARTS:
            if connection.execute(present).fetchone() is None:
                connection.execute((ROOT / "supabase" / name).read_text())
                applied.append(name)
    return applied


@pytest.fixture(scope="session")
def runner_database_url(database_url: str) -> str:
    """The runner's login on the suite's database (runner_url)."""
    url = runner_url(database_url)
    try:
        with psycopg.connect(url, connect_timeout=5):
            pass
    except psycopg.Error as exc:
        pytest.fail(f"the runner cannot log in at {url} ({exc}); run `make db` first")
    return url


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """One event loop for a module whose synchronous tests (Hypothesis) drive async code: a
    Runner's or registry's pool belongs to the loop it opened in."""
    event_loop = asyncio.new_event_loop()
    yield event_loop
    event_loop.close()


@pytest.fixture
def conn(database_url: str) -> Iterator[psycopg.Connection]:
    """An admin connection in autocommit mode, as the dashboard SQL editor has."""
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection


@pytest.fixture
def publish_tool(conn: psycopg.Connection) -> Iterator[Callable[..., str]]:
    """Publish throwaway tools (unique ids, made from `stem`); delete them afterwards, dependents first."""
    made: list[str] = []

    def publish(
        stem: str, manifest: dict[str, Any], files: dict[str, str] | None = None, *, entrypoint: str | None = None
    ) -> str:
        tool_id = f"{stem}_{uuid.uuid4().hex[:8]}"
        m = {"version": "1.0.0", **manifest, "tool_id": tool_id}
        if entrypoint:
            m["entrypoint"] = entrypoint
        rows = [{"path": p, "content_text": t, "is_entrypoint": p == entrypoint} for p, t in (files or {}).items()]
        conn.execute("select publish_tool_version(%s, %s)", (Jsonb(m), Jsonb(rows)))
        made.append(tool_id)
        return tool_id

    yield publish
    for tool_id in reversed(made):
        conn.execute("delete from tools where ref = %s", (tool_id,))


def local_settings(database_url: str, cache_dir: Path, **fields: Any) -> Settings:
    """The settings the suite's runners use: the postgres backend on `database_url`, no Supabase
    project, tool environments under `cache_dir`, and any other field as `fields` say."""
    return Settings(
        backend="postgres",
        database_url=database_url,
        supabase_url=None,
        supabase_key=None,
        cache_dir=cache_dir,
        **fields,
    )


@pytest.fixture
def make_settings(database_url: str, tmp_path: Path) -> Callable[..., Settings]:
    """local_settings on the suite's database with the cache in the test's tmp_path; a keyword
    (cache_dir=..., project_dir=..., record_runs=False, ...) overrides that field."""

    def make(**fields: Any) -> Settings:
        return local_settings(**{"database_url": database_url, "cache_dir": tmp_path, **fields})

    return make


@pytest.fixture
async def make_runner(
    database_url: str, make_settings: Callable[..., Settings]
) -> AsyncIterator[Callable[..., Runner]]:
    """Runners on the suite's database, each closed after the test: as the local owner unless
    `principal` says, with make_settings() unless `settings` says; any other keyword (environ,
    dispatcher, ...) goes to Runner as it is."""
    from runner import PostgresRegistry, Runner, local_owner

    made: list[Runner] = []

    def make(settings: Settings | None = None, *, principal: Principal | None = None, **kwargs: Any) -> Runner:
        registry = PostgresRegistry(database_url, principal=principal or local_owner())
        made.append(Runner(registry, settings or make_settings(), **kwargs))
        return made[-1]

    yield make
    for made_runner in made:
        await made_runner.aclose()


@pytest.fixture
async def runner(make_runner: Callable[..., Runner]) -> Runner:
    """A runner as the local owner on the suite's database, its cache in the test's tmp_path."""
    return make_runner()
