"""Signed versions and the trust policy, end to end: real keys, the real database, the
real CLI. A tampered version, an untrusted key and an unsigned element are refused
under policy "require"; a chain signed by trusted keys runs."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from runner.trust.content_hash import content_hash
from runner.trust.keys import generate, load, parse_public_key
from runner.trust.signing import sign, verifies

from .conftest import Chain, Project


def sign_all(project: Project, key: str, *refs: str) -> None:
    for ref in refs:
        done = project.kiwi("sign", ref, "--key", key)
        assert done.code == 0, done.err


def test_a_signature_verifies_only_its_own_content_hash(tmp_path) -> None:
    key = generate(tmp_path, "k")
    sig = sign(key, "a" * 64)
    assert verifies(sig["public_key"], "a" * 64, sig["signature"])
    assert not verifies(sig["public_key"], "b" * 64, sig["signature"])
    other = generate(tmp_path, "other")
    assert not verifies(other.public_b64, "a" * 64, sig["signature"])
    assert load(tmp_path, "k").fingerprint == key.fingerprint
    assert (tmp_path / "k.key").stat().st_mode & 0o777 == 0o600


def test_keys_are_never_overwritten_and_bad_keys_are_named(project: Project, make_key) -> None:
    make_key("mine")
    again = project.kiwi("keys", "generate", "--name", "mine")
    assert again.code == 2 and "exists already" in again.err
    with pytest.raises(Exception, match="not an Ed25519 public key"):
        parse_public_key("ed25519:AAAA")


def test_every_seeded_version_recomputes_from_the_json_the_runner_receives(conn: psycopg.Connection) -> None:
    """The runner gets manifests parsed with floats (psycopg's default), not Decimals."""
    rows = conn.execute("select tool_id, manifest, files, content_hash from resolve_chain_attestations('format_bytes')")
    for tool_id, manifest, files, stored in rows:
        assert content_hash(manifest, [(f["path"], f["sha256"]) for f in files]) == stored, tool_id


def test_a_chain_signed_by_trusted_keys_runs_under_require(
    project: Project, chain: Chain, make_key: Callable, forget_signatures: list[str]
) -> None:
    key = make_key("publisher")
    forget_signatures.append(key["fingerprint"])
    project.trust("require", {"public": [key["public_key"]]})
    sign_all(project, "publisher", chain.tool, chain.runtime, "subprocess")
    done = project.kiwi("run", chain.tool, "-p", "word=signed", "--json")
    assert done.code == 0, done.err
    assert done.json()["output"] == {"said": "signed"}
    verify = project.kiwi("verify", chain.tool, "--json")
    assert verify.code == 0
    assert [v["state"] for v in verify.json()] == ["trusted", "trusted", "trusted"]


def test_an_unsigned_element_is_refused_under_require_and_named(
    project: Project, chain: Chain, make_key: Callable, forget_signatures: list[str]
) -> None:
    key = make_key("publisher")
    forget_signatures.append(key["fingerprint"])
    project.trust("require", {"public": [key["public_key"]]})
    sign_all(project, "publisher", chain.tool, "subprocess")  # not the runtime
    done = project.kiwi("run", chain.tool, "-p", "word=x", "--json")
    assert done.code == 4
    error = done.json()["error"]
    assert f"{chain.runtime}@1.0.0 is unsigned" in error
    assert chain.tool + "@1.0.0 is" not in error.split("refuses", 1)[1]  # the signed ones are not blamed


def test_an_untrusted_key_is_refused(
    project: Project, chain: Chain, make_key: Callable, forget_signatures: list[str]
) -> None:
    trusted, stranger = make_key("trusted"), make_key("stranger")
    forget_signatures += [trusted["fingerprint"], stranger["fingerprint"]]
    project.trust("require", {"public": [trusted["public_key"]]})
    sign_all(project, "trusted", chain.runtime, "subprocess")
    sign_all(project, "stranger", chain.tool)
    done = project.kiwi("run", chain.tool, "-p", "word=x")
    assert done.code == 4
    assert f"{chain.tool}@1.0.0 is untrusted" in done.err
    assert stranger["fingerprint"][:16] in done.err
    # a key trusted for another namespace only does not count either
    project.trust("require", {"public": [trusted["public_key"]], "acme": [stranger["public_key"]]})
    assert project.kiwi("run", chain.tool, "-p", "word=x").code == 4
    # trusting it for every namespace does
    project.trust("require", {"public": [trusted["public_key"]], "*": [stranger["public_key"]]})
    assert project.kiwi("run", chain.tool, "-p", "word=x").code == 0


@pytest.mark.parametrize("what", ["file", "manifest"])
def test_a_tampered_version_is_refused(
    project: Project,
    chain: Chain,
    make_key: Callable,
    forget_signatures: list[str],
    conn: psycopg.Connection,
    what: str,
) -> None:
    key = make_key("publisher")
    forget_signatures.append(key["fingerprint"])
    project.trust("require", {"public": [key["public_key"]]})
    sign_all(project, "publisher", chain.tool, chain.runtime, "subprocess")
    assert project.kiwi("run", chain.tool, "-p", "word=before").code == 0
    # someone with write access to the database bypasses every trigger and edits the rows
    with conn.transaction():
        conn.execute("set local session_replication_role = replica")
        if what == "file":
            evil = "#!/usr/bin/env bash\necho pwned\n"
            conn.execute(
                """update tool_version_files f
                      set content_text = %(evil)s, size_bytes = octet_length(%(evil)s),
                          sha256 = encode(sha256(convert_to(%(evil)s, 'UTF8')), 'hex')
                     from tool_versions v join tools t on t.id = v.tool_uuid
                    where f.version_id = v.id and t.ref = %(ref)s""",
                {"evil": evil, "ref": chain.tool},
            )
        else:
            conn.execute(
                """update tool_versions v set manifest = jsonb_set(manifest, '{config}', '{"command": "sh"}')
                     from tools t where t.id = v.tool_uuid and t.ref = %s""",
                (chain.runtime,),
            )
    done = project.kiwi("run", chain.tool, "-p", "word=after", "--json")
    assert done.code == 4, done.out
    assert "altered" in done.json()["error"]
    assert "pwned" not in done.out
    verify = project.kiwi("verify", chain.tool, "--json")
    altered = [v["tool_id"] for v in verify.json() if v["state"] == "altered"]
    assert altered == [chain.tool if what == "file" else chain.runtime]


def test_policy_warn_runs_and_says_what_is_missing(project: Project, chain: Chain) -> None:
    project.trust("warn", {})
    done = project.kiwi("run", chain.tool, "-p", "word=w")
    assert done.code == 0, done.err
    assert f"warning: {chain.runtime}@1.0.0 is unsigned" in done.err


def test_policy_off_reads_no_signatures(project: Project, chain: Chain) -> None:
    project.trust("off", {})
    done = project.kiwi("run", chain.tool, "-p", "word=w")
    assert done.code == 0 and "unsigned" not in done.err


def test_signing_refuses_a_version_whose_rows_were_altered(
    project: Project, chain: Chain, make_key: Callable, conn: psycopg.Connection
) -> None:
    make_key("publisher")
    with conn.transaction():
        conn.execute("set local session_replication_role = replica")
        conn.execute(
            'update tool_versions v set manifest = manifest || \'{"name": "x"}\' from tools t '
            "where t.id = v.tool_uuid and t.ref = %s",
            (chain.tool,),
        )
    done = project.kiwi("sign", chain.tool, "--key", "publisher")
    assert done.code == 4 and "not signing" in done.err
    assert conn.execute(
        "select count(*) from tool_version_signatures s join tool_versions v on v.id = s.version_id "
        "join tools t on t.id = v.tool_uuid where t.ref = %s",
        (chain.tool,),
    ).fetchone() == (0,)


def test_publish_sign_publishes_and_signs_in_one_transaction(
    project: Project, make_key: Callable, forget_signatures: list[str], conn: psycopg.Connection
) -> None:
    key = make_key("publisher")
    forget_signatures.append(key["fingerprint"])
    tool_id = f"signed_pub_{key['fingerprint'][:8]}"
    folder = project.dir / ".ai" / "tools" / tool_id
    folder.mkdir(parents=True)
    (folder / "tool.yaml").write_text(
        f"tool_id: {tool_id}\ntool_type: script\nexecutor: bash_runtime\nversion: 1.0.0\n"
        "entrypoint: run.sh\nconfig:\n  timeout: 12.5\n"
    )
    (folder / "run.sh").write_bytes(b"#!/usr/bin/env bash\r\necho '{\"ok\": true}'\r\n")
    try:
        done = project.kiwi("publish", str(folder), "--sign", "--key", "publisher", "--json")
        assert done.code == 0, done.err
        assert done.json()["signature"]["key_fingerprint"] == key["fingerprint"]
        project.trust("require", {"public": [key["public_key"]], "*": []})
        verify = project.kiwi("verify", tool_id, "--json")
        assert verify.json()[0]["state"] == "trusted"
    finally:
        conn.execute("delete from tools where ref = %s", (tool_id,))


def test_publish_sign_with_a_missing_key_publishes_nothing(project: Project, conn: psycopg.Connection) -> None:
    folder = project.dir / "t"
    folder.mkdir()
    (folder / "tool.yaml").write_text("tool_id: never_published_xyz\ntool_type: knowledge\nversion: 1.0.0\n")
    done = project.kiwi("publish", str(folder), "--sign", "--key", "nobody")
    assert done.code == 2 and "no signing key" in done.err
    assert conn.execute("select count(*) from tools where ref = 'never_published_xyz'").fetchone() == (0,)
