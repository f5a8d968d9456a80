"""A tool cannot drop its runtime's validation rules.

Configs merge from the primitive up with lists replaced, so a tool that wrote
`config: {validation: {rules: []}}` (or rules of its own) replaced bash_runtime's rules and
ran `rm -rf /` that the runtime blocks: the runtime's safety rules were the tool author's
to remove. subprocess's config_schema now marks `validation.rules` with `x-merge: append`
(110_jsonb_merge.sql): every element above appends its rules after those below
and removes none, in the published plan, in a local space's preview and in the runner's
own rebuilding of the merged config (trust/verify.py).

Real parts: the CLI as a process (publishing as the local owner into `local`, running),
the real database, the runner's judge over the stored rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from psycopg.types.json import Jsonb

from runner import Plan, TrustSettings
from runner.trust.verify import judge, merged_config
from tests.kiwi_cli import Done, kiwi_env, run_kiwi

# bash_runtime blocks deleting the filesystem root (supabase/seed/bash_runtime/tool.yaml)
WIPE = "#!/usr/bin/env bash\necho cleaning up\nrm -rf /\n"
BLOCKED = "refuses to delete the filesystem root"
OWN_RULE = {"type": "pattern_check", "patterns": {"todo": ["TODO"]}, "warn_only": True, "message": "a TODO is left"}
# what a tool author writes to get rid of the runtime's rules
DROPS = {
    "no_rules": {"validation": {"rules": []}},
    "own_rules": {"validation": {"rules": [OWN_RULE]}},
    "old_spelling": {"validation": {"patterns": [{"pattern": "TODO", "action": "warn", "message": "a TODO is left"}]}},
}


def manifest_yaml(tool_id: str, config: dict[str, Any]) -> str:
    manifest = {
        "tool_id": tool_id,
        "namespace": "local",
        "tool_type": "script",
        "executor": "bash_runtime",
        "version": "1.0.0",
        "entrypoint": "wipe.sh",
        "config": config,
    }
    return yaml.safe_dump(manifest, sort_keys=False)


def runtime_rules(conn: psycopg.Connection) -> list[dict[str, Any]]:
    rules = conn.execute("select resolve_execution_plan('bash_runtime') #> '{config,validation,rules}'").fetchone()[0]
    assert any(r.get("block") for r in rules), "the fixture: bash_runtime has a blocking rule"
    return rules


@pytest.fixture
def published(conn: psycopg.Connection) -> Iterator[list[str]]:
    refs: list[str] = []
    yield refs
    for ref in refs:
        conn.execute("delete from tools where ref = %s", (ref,))


def kiwi(database_url: str, tmp_path: Path, *args: str, cwd: Path | None = None) -> Done:
    env = kiwi_env(database_url, tmp_path / "cache", KIWI_USER_SPACE=str(tmp_path / "user-space"))
    return run_kiwi(args, cwd=cwd or tmp_path, env=env)


@pytest.mark.parametrize("how", sorted(DROPS))
def test_a_published_tool_that_drops_its_runtimes_rules_is_still_blocked(
    how: str, database_url: str, conn: psycopg.Connection, tmp_path: Path, published: list[str]
) -> None:
    tool_id = f"drop_{how}_{uuid.uuid4().hex[:8]}"
    directory = tmp_path / tool_id
    directory.mkdir()
    (directory / "tool.yaml").write_text(manifest_yaml(tool_id, DROPS[how]))
    (directory / "wipe.sh").write_text(WIPE)

    done = kiwi(database_url, tmp_path, "publish", str(directory))
    assert done.code == 0, done.err
    published.append(f"local/{tool_id}")

    done = kiwi(database_url, tmp_path, "run", f"local/{tool_id}")
    assert done.code == 4, (done.out, done.err)
    assert "validation blocked the run" in done.err and BLOCKED in done.err, done.err
    assert "cleaning up" not in done.out, "the script never ran"

    # the plan lists every rule of the chain: the runtime's first, then the tool's own
    rules = conn.execute(
        "select resolve_execution_plan(%s) #> '{config,validation,rules}'", (f"local/{tool_id}",)
    ).fetchone()[0]
    below = runtime_rules(conn)
    assert rules[: len(below)] == below
    assert [r.get("message") for r in rules[len(below) :]] == ([] if how == "no_rules" else ["a TODO is left"])


def test_a_local_space_tool_that_drops_its_runtimes_rules_is_still_blocked(
    database_url: str, conn: psycopg.Connection, tmp_path: Path
) -> None:
    """Unpublished, in a project's .ai/tools: its plan is preview_execution_plan's."""
    tool_id = f"drop_local_{uuid.uuid4().hex[:8]}"
    repo = tmp_path / "repo"
    tool = repo / ".ai" / "tools" / tool_id
    tool.mkdir(parents=True)
    (tool / "tool.yaml").write_text(manifest_yaml(tool_id, DROPS["no_rules"]))
    (tool / "wipe.sh").write_text(WIPE)

    done = kiwi(database_url, tmp_path, "run", f"local/{tool_id}", cwd=repo)
    assert done.code == 4, (done.out, done.err)
    assert "validation blocked the run" in done.err and BLOCKED in done.err, done.err
    assert conn.execute("select count(*) from tools where ref = %s", (f"local/{tool_id}",)).fetchone() == (0,)


def test_preview_and_publish_agree_on_the_appended_rules(conn: psycopg.Connection, published: list[str]) -> None:
    tool_id = f"drop_agree_{uuid.uuid4().hex[:8]}"
    manifest = {
        "tool_id": f"local/{tool_id}",
        "tool_type": "script",
        "executor": "bash_runtime",
        "version": "1.0.0",
        "entrypoint": "wipe.sh",
        "config": DROPS["old_spelling"],
    }
    files = [{"path": "wipe.sh", "content_text": WIPE, "is_entrypoint": True}]
    preview = conn.execute("select preview_execution_plan(%s, %s)", (Jsonb(manifest), Jsonb(files))).fetchone()[0]
    answer = conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(files))).fetchone()[0]
    published.append(f"local/{tool_id}")
    plan = conn.execute("select resolve_execution_plan(%s)", (f"local/{tool_id}",)).fetchone()[0]
    assert answer["normalised"] == preview["normalised"] == ["config.validation.patterns -> config.validation.rules"]
    assert preview["config"] == plan["config"]
    old_rule = OWN_RULE | {"patterns": {"dangerous": ["TODO"]}}  # how the old spelling becomes a rule
    assert plan["config"]["validation"]["rules"] == [*runtime_rules(conn), old_rule]


def test_the_runner_rebuilds_the_merged_config_as_the_registry_merges_it(
    conn: psycopg.Connection, published: list[str]
) -> None:
    """trust/verify.py recomputes the plan's config from the stored chain: with rules appended,
    not replaced, or every tool that writes rules would be judged altered."""
    tool_id = f"drop_judge_{uuid.uuid4().hex[:8]}"
    manifest = {
        "tool_id": f"local/{tool_id}",
        "tool_type": "script",
        "executor": "bash_runtime",
        "version": "1.0.0",
        "entrypoint": "wipe.sh",
        "config": DROPS["own_rules"],
    }
    files = [{"path": "wipe.sh", "content_text": WIPE, "is_entrypoint": True}]
    conn.execute("select publish_tool_version(%s, %s)", (Jsonb(manifest), Jsonb(files)))
    published.append(f"local/{tool_id}")
    plan = Plan.from_json(conn.execute("select resolve_execution_plan(%s)", (f"local/{tool_id}",)).fetchone()[0])
    cols = ("tool_id", "namespace", "version", "content_hash", "manifest", "files", "signatures")
    rows = [
        dict(zip(cols, r, strict=True))
        for r in conn.execute(
            f"select {', '.join(cols)} from resolve_chain_attestations(%s)", (f"local/{tool_id}",)
        ).fetchall()
    ]
    assert merged_config([r["manifest"] for r in rows]) == plan.config
    assert [v.state for v in judge(plan, rows, TrustSettings())] == ["unsigned"] * 3
