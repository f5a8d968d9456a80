"""`kiwi serve --transport http` requires a bearer token and tells clients where to get one:
the project's authorization server (its Supabase Auth) where one is configured, through the
protected resource metadata; on the local stack, which runs none, `kiwi token`.

Real parts only: a real server process on a free loopback port against the real database,
the official MCP SDK client, raw HTTP for what a client sees before it signs in, and JWTs
signed with the local stack's secret (runner.principal.sign, `kiwi token`).
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import jwt
import pytest

from runner import LOCAL_JWT_SECRET, LOCAL_OWNER_ID, Settings, from_token
from runner.cli.serve import add_serve_command
from runner.cli.token import add_token_command
from runner.mcp_server.auth import http_auth, public_url
from runner.principal import LOCAL_ISSUER
from runner.testing.http_serving import ROOT, Served, kiwi_http_server, mcp_client, serve_env, user_token

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
TOOLS = {"search", "load", "execute", "help"}
# a hosted project's URL (never contacted: the tests' tokens are HS256, verified with the secret)
HOSTED = "https://abc.supabase.co"
METADATA = "/.well-known/oauth-protected-resource"


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """On the local stack: no authorization server is configured."""
    with kiwi_http_server(database_url, tmp_path_factory.mktemp("serve")) as s:
        yield s


@pytest.fixture(scope="module")
def served_hosted(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """As for a hosted project: SUPABASE_URL names its Supabase Auth."""
    with kiwi_http_server(database_url, tmp_path_factory.mktemp("serve-hosted"), SUPABASE_URL=HOSTED) as s:
        yield s


def python(
    *args: str, env: dict[str, str], stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, input=stdin, capture_output=True, text=True, timeout=timeout
    )


# --- before signing in -----------------------------------------------------------------------


def test_without_a_token_the_local_server_says_kiwi_token_prints_one(served: Served) -> None:
    """The local stack runs no Supabase Auth: the 401 names no metadata (there is none to send a
    client to) and says where a token comes from. Before, it sent clients to sign in at
    http://127.0.0.1:54321/auth/v1, where nothing answers."""
    for response in (
        httpx.post(served.url, json=INITIALIZE, headers=MCP_HEADERS, timeout=30),
        httpx.get(served.url, headers={"Accept": "text/event-stream"}, timeout=30),
    ):
        assert response.status_code == 401
        challenge = response.headers["WWW-Authenticate"]
        assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
        assert "resource_metadata" not in challenge and "54321" not in challenge
        assert "kiwi token" in challenge
        body = response.json()
        assert "kiwi token" in body["error_description"] and "Authorization: Bearer" in body["hint"]


def test_the_local_server_claims_no_authorization_server(served: Served) -> None:
    for path in (METADATA + "/mcp", METADATA):
        response = httpx.get(served.base + path, timeout=30)
        assert response.status_code == 404, path
        assert "authorization_servers" not in response.text
        assert "kiwi token" in response.json()["hint"]


def test_a_hosted_servers_401_names_the_metadata_and_it_names_supabase_auth(served_hosted: Served) -> None:
    metadata = f"{served_hosted.base}{METADATA}/mcp"
    for response in (
        httpx.post(served_hosted.url, json=INITIALIZE, headers=MCP_HEADERS, timeout=30),
        httpx.get(served_hosted.url, headers={"Accept": "text/event-stream"}, timeout=30),
    ):
        assert response.status_code == 401
        challenge = response.headers["WWW-Authenticate"]
        assert challenge.startswith("Bearer ")
        assert f'resource_metadata="{metadata}"' in challenge
        assert f"{HOSTED}/auth/v1" in response.json()["error_description"]
    for path in (METADATA + "/mcp", METADATA):
        response = httpx.get(served_hosted.base + path, timeout=30)
        assert response.status_code == 200, path
        doc = response.json()
        assert doc["resource"] == served_hosted.url
        assert doc["authorization_servers"] == [f"{HOSTED}/auth/v1"]
        assert doc["bearer_methods_supported"] == ["header"]


def test_the_start_up_lines_say_a_token_is_required_and_where_it_comes_from(
    served: Served, served_hosted: Served
) -> None:
    log = served.stderr()
    assert f"serving MCP at {served.url}" in log
    assert "requires a bearer token" in log and "service-role tokens refused" in log
    assert "`kiwi token` prints a token" in log and "no authorization server is configured" in log
    assert "protected resource metadata" not in log and "54321" not in log
    hosted = served_hosted.stderr()
    assert f"requires a bearer token: an access token of {HOSTED}/auth/v1" in hosted
    assert f"protected resource metadata: {served_hosted.base}{METADATA}/mcp" in hosted


async def test_a_hosted_server_still_takes_the_projects_tokens(served_hosted: Served) -> None:
    async with mcp_client(served_hosted.url, user_token()) as c:
        assert {t.name for t in (await c.list_tools()).tools} == TOOLS


# --- signed in -------------------------------------------------------------------------------


async def test_the_sdk_client_with_a_token_lists_the_four_tools_and_searches(served: Served) -> None:
    async with mcp_client(served.url, user_token()) as c:
        assert {t.name for t in (await c.list_tools()).tools} == TOOLS
        found = await c.call_tool("search", {"query": "hello"})
        assert not found.is_error, found.content
        assert (found.structured_content or {}).get("count", 0) >= 1


async def test_a_token_from_kiwi_token_signs_a_client_in(served: Served, database_url: str, tmp_path: Path) -> None:
    done = python("-m", "runner.cli.token", env=serve_env(database_url, tmp_path))
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip()
    async with mcp_client(served.url, token) as c:
        assert {t.name for t in (await c.list_tools()).tools} == TOOLS
        assert not (await c.call_tool("help", {})).is_error


# --- kiwi token ------------------------------------------------------------------------------


def test_kiwi_token_prints_a_jwt_the_local_secret_verifies(database_url: str, tmp_path: Path) -> None:
    env = serve_env(database_url, tmp_path)
    done = python("-m", "runner.cli.token", env=env)
    assert done.returncode == 0, done.stderr
    claims = jwt.decode(done.stdout.strip(), LOCAL_JWT_SECRET, algorithms=["HS256"], audience="authenticated")
    assert (claims["sub"], claims["role"], claims["iss"]) == (LOCAL_OWNER_ID, "authenticated", LOCAL_ISSUER)
    assert 0 < claims["exp"] - claims["iat"] <= 24 * 3600
    assert "Authorization: Bearer" in done.stderr
    assert from_token(done.stdout, secret=LOCAL_JWT_SECRET).user_id == LOCAL_OWNER_ID

    other = "0f8fad5b-d9cb-469f-a165-70867728950e"
    done = python("-m", "runner.cli.token", "--user", other, "--expires", "120", "--json", env=env)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["token_type"], out["expires_in"], out["user_id"], out["role"]) == (
        "bearer",
        120,
        other,
        "authenticated",
    )
    claims = jwt.decode(out["access_token"], LOCAL_JWT_SECRET, algorithms=["HS256"], audience="authenticated")
    assert claims["sub"] == other and claims["exp"] - claims["iat"] == 120

    done = python("-m", "runner.cli.token", "--role", "anon", env=env)
    assert done.returncode == 0, done.stderr
    assert from_token(done.stdout, secret=LOCAL_JWT_SECRET).role == "anon"

    # a project with an authorization server: its tokens name it as their issuer
    done = python("-m", "runner.cli.token", env={**env, "SUPABASE_URL": HOSTED})
    assert done.returncode == 0, done.stderr
    assert jwt.decode(done.stdout.strip(), LOCAL_JWT_SECRET, algorithms=["HS256"], audience="authenticated")["iss"] == (
        f"{HOSTED}/auth/v1"
    )


@pytest.mark.slow
def test_kiwi_token_without_a_known_secret_is_a_clear_error(tmp_path: Path) -> None:
    # a database elsewhere and no KIWI_JWT_SECRET: kiwi knows no secret to sign with
    env = serve_env("postgresql://u:p@db.example.invalid:5432/postgres", tmp_path)
    done = python("-m", "runner.cli.token", env=env)
    assert done.returncode == 2
    assert "no JWT secret is known" in done.stderr and "KIWI_JWT_SECRET" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    bad = python("-m", "runner.cli.token", "--user", "not-a-uuid", env=env)
    assert bad.returncode == 2 and "not a user id" in bad.stderr


def test_the_token_command_parses_its_options() -> None:
    parser = argparse.ArgumentParser(prog="kiwi")
    add_token_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["token"])
    # none given: the session's token when signed in (kiwi login), else the local owner's for a day
    assert (args.user, args.role, args.expires, args.json) == (None, None, None, False)
    assert callable(args.handler)
    for bad in (["token", "--role", "service_role"], ["token", "--expires", "0"], ["token", "--user", "x"]):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)


# --- starting the server ---------------------------------------------------------------------


def test_a_taken_port_is_a_clear_error_not_serving(database_url: str, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        done = python(
            "-m", "runner.cli.serve", "--transport", "http", "--port", port, env=serve_env(database_url, tmp_path)
        )
    assert done.returncode == 2, done.stderr
    assert "already in use" in done.stderr and port in done.stderr
    assert "serving" not in done.stderr and "Traceback" not in done.stderr


def test_stdio_says_whom_it_acts_as(database_url: str, tmp_path: Path) -> None:
    env = serve_env(database_url, tmp_path)
    done = python("-m", "runner.cli.serve", "--transport", "stdio", env=env, stdin="")
    assert f"serving MCP over stdio as user {LOCAL_OWNER_ID} (authenticated, local owner)" in done.stderr
    done = python("-m", "runner.cli.serve", "--transport", "stdio", "--admin", env=env, stdin="")
    assert "serving MCP over stdio as service_role (service_role, admin)" in done.stderr


def test_insecure_no_auth_is_refused_off_loopback(database_url: str, tmp_path: Path) -> None:
    args = ("-m", "runner.cli.serve", "--transport", "http", "--host", "0.0.0.0", "--insecure-no-auth")
    done = python(*args, "--port", "0", env=serve_env(database_url, tmp_path))
    assert done.returncode == 2
    assert "only a loopback address may serve without tokens" in done.stderr and "Traceback" not in done.stderr


async def test_insecure_no_auth_on_loopback_serves_without_tokens_and_warns(database_url: str, tmp_path: Path) -> None:
    with kiwi_http_server(database_url, tmp_path, "--insecure-no-auth") as s:
        async with mcp_client(s.url, None) as c:
            assert {t.name for t in (await c.list_tools()).tools} == TOOLS
        assert "NO AUTHENTICATION" in s.stderr()
        assert f"acts as user {LOCAL_OWNER_ID}" in s.stderr()  # the server's own principal, not admin
        assert httpx.get(f"{s.base}/.well-known/oauth-protected-resource/mcp", timeout=30).status_code == 404


async def test_the_public_url_and_issuer_are_what_the_metadata_advertises(database_url: str, tmp_path: Path) -> None:
    issuer = "https://auth.example.com/auth/v1"
    public = "https://kiwi.example.com/tools/mcp"
    with kiwi_http_server(database_url, tmp_path, "--public-url", public, KIWI_AUTH_ISSUER=issuer) as s:
        response = httpx.post(s.url, json=INITIALIZE, headers=MCP_HEADERS, timeout=30)
        assert response.status_code == 401
        metadata = "https://kiwi.example.com/.well-known/oauth-protected-resource/tools/mcp"
        assert f'resource_metadata="{metadata}"' in response.headers["WWW-Authenticate"]
        doc = httpx.get(f"{s.base}/.well-known/oauth-protected-resource/tools/mcp", timeout=30).json()
        assert doc["resource"] == public and doc["authorization_servers"] == [issuer]


def test_the_authorization_server_and_resource_follow_the_settings() -> None:
    hosted = Settings.load({"SUPABASE_URL": "https://abc.supabase.co", "KIWI_DATABASE_URL": "postgresql://x@db/p"})
    auth = http_auth(hosted, "https://kiwi.example.com/mcp", environ={})
    assert auth.issuer == "https://abc.supabase.co/auth/v1"
    assert auth.verifier.jwks_url == "https://abc.supabase.co/auth/v1/.well-known/jwks.json"
    assert auth.metadata_url == "https://kiwi.example.com/.well-known/oauth-protected-resource/mcp"
    local = Settings.load({})
    assert local.auth_issuer({}) is None
    bare = http_auth(local, "http://127.0.0.1:1/mcp", environ={})
    assert (bare.issuer, bare.metadata_url, bare.resource) == (None, None, "http://127.0.0.1:1/mcp")
    assert http_auth(local, "http://127.0.0.1:1/mcp", environ={"KIWI_AUTH_ISSUER": "https://a.b/x/"}).issuer == (
        "https://a.b/x"
    )
    assert public_url("127.0.0.1", 8765, None, {}) == "http://127.0.0.1:8765/mcp"
    assert public_url("::1", 8765, None, {}) == "http://[::1]:8765/mcp"
    assert public_url("0.0.0.0", 1, None, {"KIWI_PUBLIC_URL": "https://k.example.com"}) == "https://k.example.com/mcp"


def test_the_serve_command_parses_its_authentication_options() -> None:
    parser = argparse.ArgumentParser(prog="kiwi")
    add_serve_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["serve", "--transport", "http"])
    assert (args.serve_admin, args.insecure_no_auth, args.public_url) == (False, False, None)
    args = parser.parse_args(["serve", "--admin", "--public-url", "https://k.example.com/mcp", "--insecure-no-auth"])
    assert (args.serve_admin, args.insecure_no_auth, args.public_url) == (True, True, "https://k.example.com/mcp")
