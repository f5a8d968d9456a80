"""The trust features' error paths: bad settings, bad keys, an empty lock, a signature
that does not verify. Each is a clear error (or verdict) naming what is wrong."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from runner import Settings, UsageError
from runner.trust.keys import generate, load

from .conftest import Chain, Project


def settings_from(tmp_path: Path, toml: str, **env: str) -> Settings:
    config = tmp_path / "config.toml"
    config.write_text(toml)
    return Settings.load({"HOME": str(tmp_path), **env}, config)


def test_trust_settings_are_read_and_checked(tmp_path: Path) -> None:
    good = settings_from(tmp_path, '[trust]\npolicy = "warn"\n[trust.keys]\nacme = ["k1"]\n"*" = ["k2"]\n')
    assert good.trust.policy == "warn" and good.trust.keys_for("acme") == ("k1", "k2")
    assert settings_from(tmp_path, "", KIWI_TRUST_POLICY="require").trust.policy == "require"
    with pytest.raises(UsageError, match="unknown trust policy 'strict'"):
        settings_from(tmp_path, '[trust]\npolicy = "strict"\n')
    with pytest.raises(UsageError, match=r"\[trust.keys\] maps a namespace to a list"):
        settings_from(tmp_path, '[trust.keys]\npublic = "not a list"\n')
    with pytest.raises(UsageError, match=r"\[trust\] must be a table"):
        settings_from(tmp_path, 'trust = "on"\n')


def test_bad_key_names_and_files_are_named(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="bad key name"):
        generate(tmp_path, "../escape")
    with pytest.raises(UsageError, match="no signing key 'missing'"):
        load(tmp_path, "missing")
    (tmp_path / "garbage.key").write_text("not a pem")
    with pytest.raises(UsageError, match="not an unencrypted PEM private key"):
        load(tmp_path, "garbage")


def test_lock_with_nothing_locked_says_so(project: Project) -> None:
    check = project.kiwi("lock")
    assert check.code == 2 and "no lockfile at" in check.err
    update = project.kiwi("lock", "--update")
    assert update.code == 2 and "nothing is locked yet" in update.err


def test_a_trusted_keys_signature_that_does_not_verify_is_refused(
    project: Project, chain: Chain, make_key: Callable, forget_signatures: list[str], conn: psycopg.Connection
) -> None:
    key = make_key("publisher")
    forget_signatures.append(key["fingerprint"])
    project.trust("require", {"public": [key["public_key"]]})
    for ref in (chain.runtime, "subprocess"):
        assert project.kiwi("sign", ref, "--key", "publisher").code == 0
    # a row that claims the trusted key but carries bytes it never signed (written as admin)
    bogus = base64.b64encode(bytes(64)).decode()
    conn.execute(
        """insert into tool_version_signatures (version_id, content_hash, public_key, signature)
           select v.id, v.content_hash, %s, %s from tool_versions v join tools t on t.id = v.tool_uuid
            where t.ref = %s""",
        (key["public_key"].removeprefix("ed25519:"), bogus, chain.tool),
    )
    done = project.kiwi("run", chain.tool, "-p", "word=x", "--json")
    assert done.code == 4
    assert f"{chain.tool}@1.0.0 is bad signature" in done.json()["error"]


def test_a_plan_not_made_of_the_stored_chain_is_altered(conn: psycopg.Connection) -> None:
    """The runner's plan against the stored rows (as a stale or forged plan cache would give)."""
    import dataclasses
    import json

    from runner import Plan, TrustSettings
    from runner.trust.verify import judge

    plan = Plan.from_json(conn.execute("select resolve_execution_plan('hello_world')").fetchone()[0])
    cols = ("tool_id", "namespace", "version", "content_hash", "manifest", "files", "signatures")
    rows = [
        dict(zip(cols, r, strict=True))
        for r in conn.execute(f"select {', '.join(cols)} from resolve_chain_attestations('hello_world')")
    ]
    trust = TrustSettings()
    assert [v.state for v in judge(plan, rows, trust)] == ["unsigned"] * 3

    forged_config = dataclasses.replace(plan, config={**plan.config, "command": "sh"})
    assert [v.state for v in judge(forged_config, rows, trust)] == ["altered", "unsigned", "unsigned"]
    assert "merged config" in judge(forged_config, rows, trust)[0].detail

    moved = json.loads(json.dumps(rows))
    moved[1]["version"] = "9.9.9"
    verdicts = judge(plan, moved, trust)
    assert verdicts[1].state == "altered" and "the registry stores 9.9.9" in verdicts[1].detail

    other_chain = [*rows[:1], {**rows[1], "tool_id": "python_runtime"}, *rows[2:]]
    assert {v.state for v in judge(plan, other_chain, trust)} == {"altered"}
