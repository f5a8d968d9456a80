"""The console in a real browser: Playwright driving Debian's Chromium (never Playwright's own
download) against a real `kiwi serve --transport http`, whose /console these pages are. A
person signs in, approves an agent's pending call and sees the agent's call complete (an MCP
task run by a real `kiwi worker`), finds a tool by a sentence, opens a diff between two
versions, and never sees a second user's private tool. Screenshots of the main pages are
written to tests/console/screenshots/ for a reviewer."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from psycopg.types.json import Jsonb

from runner.testing.http_serving import Served, kiwi_http_server, two_tenants, user_token
from tests.mcp_server.task_fleet import create_task, kiwi_worker, legacy_client, task_result, wait_for_status

pytestmark = pytest.mark.slow  # a browser, kiwi serve and kiwi worker processes

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).parent / "screenshots"


@pytest.fixture(scope="module")
def served(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with kiwi_http_server(database_url, tmp_path_factory.mktemp("console-serve")) as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert CHROMIUM.exists(), "Debian's chromium is missing: `scripts/stack up` installs it (apt-get install chromium)"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    opened = context.new_page()
    opened.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield opened
    context.close()
    assert not [e for e in errors if "Content Security Policy" in e], errors  # nothing the CSP had to block


def shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def sign_in(page: Page, served: Served, token: str) -> None:
    page.goto(f"{served.base}/console/signin")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    page.get_by_label("Access token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Approvals")).to_be_visible()


def test_a_person_approves_a_pending_call_and_the_agents_call_completes(
    page: Page, served: Served, database_url: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    with two_tenants(conn, "console_") as users:
        owner, agent_user = users["a"], users["b"]
        tool = f"{owner['ns']}/gated_{uuid.uuid4().hex[:6]}"
        manifest = {
            "tool_id": tool.split("/")[1],
            "namespace": owner["ns"],
            "version": "1.0.0",
            "tool_type": "script",
            "executor": "bash_runtime",
            "visibility": "public",
            "entrypoint": "run.sh",
            "parameters": [{"name": "target", "type": "string"}],
        }
        files = [
            {
                "path": "run.sh",
                "is_entrypoint": True,
                "content_text": 'printf \'{"deployed": "%s"}\\n\' "$KIWI_PARAM_TARGET"\n',
            }
        ]
        conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(files)))
        conn.execute("insert into approval_policies (pattern, ttl_seconds) values (%s, 600)", (tool,))
        sign_in(page, served, owner["token"])
        page.goto(f"{served.base}/console/approvals")
        expect(page.locator("#no-approvals")).to_be_visible()

        answer: dict[str, Any] = {}

        async def agent() -> None:
            async with legacy_client(served.url, agent_user["token"]) as client:
                created = await create_task(
                    client, {"action": "run", "item_id": tool, "parameters": {"target": "prod"}}
                )
                await wait_for_status(client, created.task.task_id, "input_required")
                answer["result"] = await asyncio.wait_for(task_result(client, created.task.task_id), timeout=90)

        def agent_thread() -> None:
            try:
                asyncio.run(agent())
            except BaseException as e:
                answer["error"] = e

        with kiwi_worker(database_url, tmp_path / "worker"):
            thread = threading.Thread(target=agent_thread, daemon=True)
            thread.start()
            row = page.locator("tr.approval", has_text=tool)
            expect(row).to_be_visible(timeout=60_000)  # appeared without a reload (htmx polls)
            expect(row).to_contain_text(agent_user["id"])
            expect(row).to_contain_text("bytes")
            expect(row).to_contain_text('"target": "prod"')  # a queued run's parameters, as the database holds them
            shot(page, "approvals")
            row.get_by_label("reason").fill("looks right to me")
            row.get_by_role("button", name="Approve").click()
            expect(page.locator("#decided")).to_contain_text("approved")
            thread.join(timeout=90)
            assert not thread.is_alive(), "the agent's call never completed"
        assert "error" not in answer, answer.get("error")
        result = answer["result"]
        assert not result.is_error, result.content
        assert result.structured_content["output"] == {"deployed": "prod"}
        decided = conn.execute(
            "select status, reason, decided_by from approvals where tool_id = %s", (tool,)
        ).fetchone()
        assert decided == ("used", "looks right to me", owner["id"])

    # the agent sees its run; its person may open it
    sign_in(page, served, agent_user["token"])
    page.goto(f"{served.base}/console/runs?tool={tool}")
    page.locator("tr.run a").first.click()
    expect(page.locator("#run-status")).to_contain_text("success")
    expect(page.locator("#run-params")).to_contain_text('"target": "prod"')  # what the record kept
    expect(page.locator("#run-output")).to_contain_text('"deployed": "prod"')
    shot(page, "run")
    page.goto(f"{served.base}/console/queued")
    shot(page, "queued")


def test_a_tool_is_found_by_a_sentence_and_two_versions_are_compared(
    page: Page, served: Served, publish_tool: Callable[..., str], conn: psycopg.Connection
) -> None:
    tool = publish_tool(
        "syllables",
        {
            "tool_type": "script",
            "executor": "bash_runtime",
            "description": "Counts the syllables of every line in a poem.",
        },
        {"run.sh": "echo '{\"syllables\": 1}'\n"},
        entrypoint="run.sh",
    )
    newer = {
        "tool_id": tool,
        "version": "1.1.0",
        "tool_type": "script",
        "executor": "bash_runtime",
        "entrypoint": "run.sh",
        "description": "Counts the syllables of every line in a poem, and the stresses.",
    }
    files = [{"path": "run.sh", "is_entrypoint": True, "content_text": "echo '{\"syllables\": 2}'\n"}]
    conn.execute("select publish_tool_version(%s, %s)", (Jsonb(newer), Jsonb(files)))

    sign_in(page, served, user_token())
    page.goto(f"{served.base}/console/registry")
    page.get_by_label("search").fill("count the syllables in each line of my poem")
    page.get_by_role("button", name="Search").click()
    found = page.locator("li.result", has_text=tool)
    expect(found).to_be_visible()
    shot(page, "registry")
    found.get_by_role("link", name=tool).click()
    expect(page.locator("#chain")).to_contain_text("bash_runtime")
    expect(page.locator("tr.version-row")).to_have_count(2)
    shot(page, "tool")
    page.get_by_label("Compare").select_option("1.0.0")
    page.get_by_label("with").select_option("1.1.0")
    page.get_by_role("button", name="Diff").click()
    part = page.locator('section.diff-part[data-name="run.sh"]')
    expect(part.locator(".add")).to_contain_text('{"syllables": 2}')
    expect(part.locator(".remove")).to_contain_text('{"syllables": 1}')
    expect(page.locator('section.diff-part[data-name="tool.yaml"] .add', has_text="stresses")).to_be_visible()
    shot(page, "diff")


def test_a_second_users_private_tool_never_appears(page: Page, served: Served, conn: psycopg.Connection) -> None:
    with two_tenants(conn, "console_") as users:
        a, b = users["a"], users["b"]
        name = f"private_{uuid.uuid4().hex[:6]}"
        manifest = {
            "tool_id": name,
            "namespace": b["ns"],
            "version": "1.0.0",
            "tool_type": "knowledge",
            "visibility": "private",
            "description": "Where the amber lighthouse keeps its spare keys.",
        }
        conn.execute(
            "select publish_tool_version(%s, %s)",
            (Jsonb(manifest), Jsonb([{"path": "keys.md", "content_text": "under the mat"}])),
        )
        sign_in(page, served, a["token"])
        page.goto(f"{served.base}/console/registry?q=amber+lighthouse+spare+keys")
        expect(page.get_by_role("heading", name="Registry")).to_be_visible()
        assert name not in page.content()
        for path in ("/console/registry", "/console/servers", "/console/runs", "/console/approvals"):
            page.goto(f"{served.base}{path}")
            assert name not in page.content(), path
        page.goto(f"{served.base}/console/servers")
        shot(page, "servers")
        opened = page.goto(f"{served.base}/console/tools/{b['ns']}/{name}")
        assert opened is not None and opened.status == 404
        assert "under the mat" not in page.content() and "lighthouse" not in page.content()
        # its owner does see it
        sign_in(page, served, b["token"])
        page.goto(f"{served.base}/console/registry?q=amber+lighthouse+spare+keys")
        expect(page.locator("li.result", has_text=name)).to_be_visible()
