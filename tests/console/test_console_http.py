"""The console without a browser: sign-in, CSRF refusals, the Content-Security-Policy, what a
tool printed shown as text, and RLS (a page shows only what its person may query). The real
app in process over the suite's database, tokens signed as `kiwi token` signs them."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable

import httpx
import psycopg

from runner import LOCAL_JWT_SECRET, PostgresRegistry, from_token
from runner.testing.http_serving import service_role_token, two_tenants, user_token
from tests.conftest import runner_url
from tests.console.conftest import csrf_of, sign_in

Browse = Callable[[], httpx.AsyncClient]


async def test_a_page_sends_a_person_not_signed_in_to_the_sign_in_form(browse: Browse) -> None:
    async with browse() as client:
        answer = await client.get("/console/runs", follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"] == "/console/signin"
        polled = await client.get("/console/approvals/rows", headers={"HX-Request": "true"})
        assert polled.status_code == 401 and polled.headers["HX-Redirect"] == "/console/signin"


async def test_every_answer_carries_a_strict_content_security_policy(browse: Browse) -> None:
    async with browse() as client:
        for path in ("/console/signin", "/console/static/htmx.min.js", "/console/nowhere"):
            csp = (await client.get(path)).headers["content-security-policy"]
            assert "script-src 'self'" in csp and "default-src 'none'" in csp
            assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        await sign_in(client)
        for path in ("/console/approvals", "/console/runs", "/console/registry", "/console/servers", "/console/queued"):
            page = await client.get(path)
            assert page.status_code == 200, page.text
            assert not re.search(r"<script(?![^>]*\bsrc=)", page.text), f"inline script on {path}"
            assert not re.search(r"\son[a-z]+=", page.text), f"an inline handler on {path}"
            assert " style=" not in page.text


async def test_a_form_without_its_csrf_token_is_refused(browse: Browse) -> None:
    async with browse() as client:
        form = await client.get("/console/signin")
        refused = await client.post("/console/signin", data={"token": user_token()})
        assert refused.status_code == 403 and "CSRF" in refused.text
        await sign_in(client)
        target = f"/console/approvals/{uuid.uuid4()}/decide"
        for data in ({"decision": "approve"}, {"decision": "approve", "csrf": "0" * 64}):
            answer = await client.post(target, data=data)
            assert answer.status_code == 403 and "CSRF" in answer.text
        good = csrf_of(form.text)
        foreign = await client.post(
            target, data={"decision": "approve", "csrf": good}, headers={"Origin": "https://evil.example"}
        )
        assert foreign.status_code == 403
        signed_out = await client.post("/console/signout", data={})
        assert signed_out.status_code == 403
        # with the token, the same form reaches the registry, which answers for the approval
        reached = await client.post(target, data={"decision": "approve", "csrf": good})
        assert reached.status_code == 404 and "Traceback" not in reached.text


async def test_a_bad_or_an_admin_token_signs_nobody_in(browse: Browse) -> None:
    async with browse() as client:
        form = await client.get("/console/signin")
        for token in (
            "not-a-token",
            user_token(secret="another-secret-of-at-least-32-characters!!"),
            service_role_token(),
        ):
            answer = await client.post("/console/signin", data={"csrf": csrf_of(form.text), "token": token})
            assert answer.status_code == 401 and 'role="alert"' in answer.text
            assert "kiwi_console_session" not in answer.headers.get("set-cookie", "")
        answer = await client.post("/console/signin", data={"csrf": csrf_of(form.text), "token": user_token()})
        cookie = answer.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/console" in cookie


async def test_what_a_tool_printed_is_shown_as_text_never_as_html(
    browse: Browse, database_url: str, conn: psycopg.Connection
) -> None:
    printed = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    with two_tenants(conn, "console_") as users:
        a = users["a"]
        registry = PostgresRegistry(runner_url(database_url), principal=from_token(a["token"], secret=LOCAL_JWT_SECRET))
        try:
            run_id = await registry.record_run(
                {
                    "tool_id": f"{a['ns']}/shouter",
                    "status": "error",
                    "error_summary": printed,
                    "duration_ms": 5,
                    "payload": {"params": {"q": printed}, "output": printed, "stderr": printed, "truncated": []},
                }
            )
        finally:
            await registry.aclose()
        try:
            async with browse() as client:
                await sign_in(client, a["token"])
                page = await client.get(f"/console/runs/{run_id}")
                assert page.status_code == 200, page.text
                assert page.text.count("&lt;script&gt;alert(") == 3, "the error, the output and stderr, as text"
                assert "\\u003cscript\\u003e" in page.text, "the parameters as JSON, its < escaped"
                assert "<script>alert" not in page.text and "<img src=x" not in page.text
                listing = await client.get("/console/runs", params={"status": "error"})
                assert "&lt;script&gt;" in listing.text and "<script>alert" not in listing.text
        finally:
            conn.execute("delete from tool_runs where id = %s", (run_id,))


async def test_a_page_never_shows_what_its_person_could_not_query(
    browse: Browse, database_url: str, conn: psycopg.Connection
) -> None:
    with two_tenants(conn, "console_") as users:
        a, b = users["a"], users["b"]
        secret_name = f"hidden_{uuid.uuid4().hex[:8]}"
        registry = PostgresRegistry(runner_url(database_url), principal=from_token(b["token"], secret=LOCAL_JWT_SECRET))
        try:
            manifest = {
                "tool_id": secret_name,
                "namespace": b["ns"],
                "version": "1.0.0",
                "tool_type": "knowledge",
                "visibility": "private",
                "description": "A private note about violet submarines.",
            }
            await registry.publish(manifest, [{"path": "note.md", "content_text": "violet submarines"}])
            run_id = await registry.record_run({"tool_id": f"{b['ns']}/{secret_name}", "status": "success"})
        finally:
            await registry.aclose()
        ref = f"{b['ns']}/{secret_name}"
        try:
            async with browse() as owner:
                await sign_in(owner, b["token"])
                assert (await owner.get(f"/console/tools/{ref}")).status_code == 200
                assert ref in (await owner.get("/console/registry", params={"q": "violet submarines"})).text
                assert run_id in (await owner.get("/console/runs")).text
            async with browse() as other:
                await sign_in(other, a["token"])
                found = await other.get("/console/registry", params={"q": "violet submarines"})
                assert found.status_code == 200 and secret_name not in found.text
                page = await other.get(f"/console/tools/{ref}")
                assert page.status_code == 404 and secret_name in page.text  # the error names what was asked
                assert "violet" not in page.text
                assert (await other.get(f"/console/runs/{run_id}")).status_code == 404
                assert run_id not in (await other.get("/console/runs")).text
        finally:
            conn.execute("delete from tool_runs where id = %s", (run_id,))


async def test_a_runs_page_shows_its_trace(browse: Browse, database_url: str, conn: psycopg.Connection) -> None:
    trace_id = uuid.uuid4().hex
    with two_tenants(conn, "console_") as users:
        a = users["a"]
        registry = PostgresRegistry(runner_url(database_url), principal=from_token(a["token"], secret=LOCAL_JWT_SECRET))
        try:
            traced = await registry.record_run({"tool_id": f"{a['ns']}/t", "status": "success", "trace_id": trace_id})
            untraced = await registry.record_run({"tool_id": f"{a['ns']}/t", "status": "success"})
        finally:
            await registry.aclose()
        try:
            async with browse() as client:
                await sign_in(client, a["token"])
                page = await client.get(f"/console/runs/{traced}")
                assert re.search(rf'id="run-trace">{trace_id}<', page.text), page.text
                page = await client.get(f"/console/runs/{untraced}")
                assert 'id="run-trace">none recorded' in page.text
        finally:
            conn.execute("delete from tool_runs where id = any(%s::uuid[])", ([traced, untraced],))
