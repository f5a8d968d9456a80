"""supabase/config.toml names the PostgreSQL major version the project runs on: the newest the
Supabase CLI accepts (17; it refuses 16 and 18), which the local stack's PostgreSQL is not older than."""

from __future__ import annotations

import tomllib

import psycopg

from tests.conftest import ROOT

CLI_NEWEST_MAJOR = 17  # supabase 3.1: "Invalid db.major_version: 18"


def test_config_names_the_newest_major_version_the_cli_accepts(database_url: str) -> None:
    config = tomllib.loads((ROOT / "supabase" / "config.toml").read_text())
    major = config["db"]["major_version"]
    assert major == CLI_NEWEST_MAJOR
    with psycopg.connect(database_url) as conn:
        running = int(conn.execute("show server_version_num").fetchone()[0]) // 10000
    assert running >= major, "the migrations are tested on a server at least as new as the one the file names"
