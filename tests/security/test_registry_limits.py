"""The registry has limits, kept as data (issue 13, item 4).

Each finding is reproduced as it was found: through `select publish_tool_version(...)`
as a signed-in user who owns a throwaway namespace, in a transaction that is rolled
back. Before the limits the registry took every one of these; now each is refused
(22023) with a message that names the field and the limit (registry_limits.<name>).
The limits are rows of public.registry_limits: the last tests change one and see
publish and preview follow, and check who may change them.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner import Plan, PlanFile, Refused
from runner.core.materialize import materialise

MiB = 1024 * 1024


@dataclass(frozen=True)
class Publisher:
    """A signed-in user acting in one rolled-back transaction, owner of namespace `ns`."""

    conn: psycopg.Connection
    user: uuid.UUID
    ns: str

    def act(self, role: str = "authenticated") -> None:
        claims: dict[str, Any] = {"role": role} | ({"sub": str(self.user)} if role == "authenticated" else {})
        self.conn.execute(
            "select set_config('request.jwt.claims', %s, true), set_config('role', %s, true)",
            (json.dumps(claims), role),
        )

    def admin(self) -> None:
        self.conn.execute("select set_config('role', 'none', true), set_config('request.jwt.claims', '', true)")

    def manifest(self, **fields: Any) -> dict[str, Any]:
        return {
            "tool_id": f"{self.ns}/t_{uuid.uuid4().hex[:6]}",
            "tool_type": "script",
            "executor": "bash_runtime",
            "version": "1.0.0",
            **fields,
        }

    def publish(self, manifest: dict[str, Any], files: list[dict[str, Any]], manifest_yaml: str | None = None) -> Any:
        row = self.conn.execute(
            "select publish_tool_version(%s, %s, %s)", (Jsonb(manifest), Jsonb(files), manifest_yaml)
        ).fetchone()
        return row[0] if row else None

    def refusal(self, manifest: dict[str, Any], files: list[dict[str, Any]], manifest_yaml: str | None = None) -> str:
        """The message of the 22023 this publish raises (the transaction goes on)."""
        with pytest.raises(psycopg.Error) as raised, self.conn.transaction():
            self.publish(manifest, files, manifest_yaml)
        assert raised.value.sqlstate == "22023", f"{raised.value.sqlstate}: {raised.value}"
        return str(raised.value.diag.message_primary)


@pytest.fixture
def publisher(database_url: str) -> Iterator[Publisher]:
    with psycopg.connect(database_url, autocommit=True) as conn, conn.transaction(force_rollback=True):
        p = Publisher(conn, uuid.uuid4(), f"lim_{uuid.uuid4().hex[:8]}")
        conn.execute("insert into namespaces (namespace, owner_id) values (%s, %s)", (p.ns, p.user))
        p.act()
        yield p


def script(path: str = "run.sh", text: str = "echo hi\n") -> dict[str, Any]:
    return {"path": path, "content_text": text}


# -- the findings --------------------------------------------------------------------------


def test_a_50_mb_file_is_refused_naming_the_file_and_the_limit(publisher: Publisher) -> None:
    message = publisher.refusal(publisher.manifest(), [script("run.sh", "x" * (50 * MiB))])
    assert 'files[1] ("run.sh"): 52428800 bytes, more than the limit of 1048576' in message
    assert "registry_limits.file_bytes" in message


def test_a_stored_file_declaring_50_mb_is_refused_too(publisher: Publisher) -> None:
    stored = {"path": "big.bin", "storage_key": "bucket/big.bin", "sha256": "a" * 64, "size_bytes": 50 * MiB}
    message = publisher.refusal(publisher.manifest(tool_type="knowledge", executor=None), [stored])
    assert "registry_limits.file_bytes" in message


def test_10001_files_are_refused_naming_the_limit(publisher: Publisher) -> None:
    files = [script(f"f{i}.sh") for i in range(10_001)]
    message = publisher.refusal(publisher.manifest(entrypoint="f0.sh"), files)
    wanted = "files: 10001 files, more than the limit of 500 (registry_limits.files_per_version)"
    assert message == f"invalid manifest: {wanted}"


def test_files_over_the_version_total_are_refused(publisher: Publisher) -> None:
    files = [script(f"f{i}.sh", "y" * MiB) for i in range(11)]
    message = publisher.refusal(publisher.manifest(entrypoint="f0.sh"), files)
    assert "files: 11534336 bytes in all, more than the limit of 10485760 (registry_limits.version_bytes)" in message


def test_100k_tags_are_refused_naming_the_limit(publisher: Publisher) -> None:
    message = publisher.refusal(publisher.manifest(tags=[f"t{i}" for i in range(100_000)]), [script()])
    assert "tags: 100000 tags, more than the limit of 50 (registry_limits.tags)" in message


def test_a_long_tag_is_refused_by_its_position(publisher: Publisher) -> None:
    message = publisher.refusal(publisher.manifest(tags=["ok", "z" * 51]), [script()])
    assert "tags[2]: 51 characters, more than the limit of 50 (registry_limits.tag_chars)" in message


def test_a_20_mb_manifest_yaml_is_refused_naming_the_limit(publisher: Publisher) -> None:
    message = publisher.refusal(publisher.manifest(), [script()], "# " + "y" * (20 * MiB))
    wanted = "manifest_yaml: 20971522 bytes, more than the limit of 262144 (registry_limits.manifest_yaml_bytes)"
    assert wanted in message


def test_a_huge_manifest_is_refused_before_it_is_read(publisher: Publisher) -> None:
    message = publisher.refusal(publisher.manifest(config={"blob": "q" * MiB}), [script()])
    wanted = r"manifest: \d+ bytes as JSON, more than the limit of 262144 \(registry_limits.manifest_bytes\)"
    assert re.search(wanted, message)


def test_a_long_description_is_refused_naming_the_field(publisher: Publisher) -> None:
    message = publisher.refusal(publisher.manifest(description="d" * 4001), [script()])
    wanted = "description: 4001 characters, more than the limit of 4000 (registry_limits.text_field_chars.description)"
    assert wanted in message


def test_a_file_beside_its_own_directory_is_refused(publisher: Publisher) -> None:
    """`x` beside `x/y` made `kiwi run` print a traceback: no filesystem holds both."""
    files = [script("run.sh"), script("x", "a"), script("x/y", "b")]
    message = publisher.refusal(publisher.manifest(entrypoint="run.sh"), files)
    assert 'files[2].path: "x" is a file, but "x/y" needs it to be a directory' in message


def test_a_300_byte_path_segment_is_refused(publisher: Publisher) -> None:
    files = [script("run.sh"), script("d/" + "s" * 300 + ".txt")]
    message = publisher.refusal(publisher.manifest(entrypoint="run.sh"), files)
    assert "files[2].path: the name" in message
    assert "is 304 bytes, more than the limit of 255 (registry_limits.path_segment_bytes)" in message


def test_a_path_segment_is_measured_in_bytes(publisher: Publisher) -> None:
    files = [script("run.sh"), script("é" * 128)]  # 128 characters, 256 bytes
    message = publisher.refusal(publisher.manifest(entrypoint="run.sh"), files)
    assert "is 256 bytes, more than the limit of 255" in message


@pytest.mark.parametrize("path", [".kiwi-complete", ".KIWI-COMPLETE", "sub/.kiwi-complete", ".kiwi", ".kiwi-env/x"])
def test_the_runners_reserved_names_are_refused(publisher: Publisher, path: str) -> None:
    message = publisher.refusal(publisher.manifest(entrypoint="run.sh"), [script("run.sh"), script(path)])
    assert "files[2].path:" in message
    assert "registry_limits.reserved_" in message


@pytest.mark.parametrize(
    ("field", "value", "wanted"),
    [
        ("content_text", 5, "files[1].content_text: must be a JSON string, not number"),
        ("content_text", ["echo"], "files[1].content_text: must be a JSON string, not array"),
        ("path", 7, "files[1].path: must be a JSON string, not number"),
        ("is_entrypoint", "yes", "files[1].is_entrypoint: must be a JSON boolean, not string"),
        ("media_type", 1, "files[1].media_type: must be a JSON string, not number"),
        ("size_bytes", "zz", "files[1].size_bytes: must be a JSON number, not string"),
    ],
)
def test_each_file_field_must_have_its_json_type(publisher: Publisher, field: str, value: Any, wanted: str) -> None:
    """`content_text: 5` was stored as "5"."""
    file = {"path": "run.sh", "content_text": "echo hi", field: value}
    message = publisher.refusal(publisher.manifest(), [file])
    assert wanted in message
    assert "registry_limits.file_field_types" in message


def test_null_counts_as_not_given(publisher: Publisher) -> None:
    answer = publisher.publish(
        publisher.manifest(), [{"path": "run.sh", "content_text": "echo", "media_type": None, "is_entrypoint": None}]
    )
    assert answer["created"] is True


def test_content_within_every_limit_is_published(publisher: Publisher) -> None:
    files = [script("run.sh", "x" * MiB), script("lib/a.sh"), script("lib/b/c.sh"), script("s" * 255)]
    answer = publisher.publish(publisher.manifest(entrypoint="run.sh", tags=["t" * 50] * 50), files, "y" * 262144)
    assert answer["created"] is True


# -- limits are data ------------------------------------------------------------------------


def test_a_changed_limit_applies_to_publish_and_preview_alike(publisher: Publisher) -> None:
    publisher.admin()
    publisher.conn.execute("update registry_limits set value = '10' where name = 'file_bytes'")
    publisher.act()
    manifest, files = publisher.manifest(), [script("run.sh", "0123456789A")]
    assert "more than the limit of 10 (registry_limits.file_bytes)" in publisher.refusal(manifest, files)
    with pytest.raises(psycopg.Error) as raised, publisher.conn.transaction():
        publisher.conn.execute("select preview_execution_plan(%s, %s)", (Jsonb(manifest), Jsonb(files)))
    assert raised.value.sqlstate == "22023"
    assert "more than the limit of 10 (registry_limits.file_bytes)" in str(raised.value)


def test_a_deleted_limit_is_lifted(publisher: Publisher) -> None:
    publisher.admin()
    publisher.conn.execute("delete from registry_limits where name = 'tags'")
    publisher.act()
    assert publisher.publish(publisher.manifest(tags=["a"] * 60), [script()])["created"] is True


@pytest.mark.parametrize("role", ["anon", "authenticated"])
def test_api_roles_read_the_limits_but_cannot_change_them(publisher: Publisher, role: str) -> None:
    publisher.act(role)
    names = {r[0] for r in publisher.conn.execute("select name from registry_limits").fetchall()}
    assert {"file_bytes", "files_per_version", "version_bytes", "tags", "path_segment_bytes"} <= names
    for sql in (
        "update registry_limits set value = '1' where name = 'file_bytes'",
        "delete from registry_limits",
        "insert into registry_limits (name, value, description) values ('x', '1', 'x')",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege), publisher.conn.transaction():
            publisher.conn.execute(sql)


def test_service_role_changes_a_limit_but_not_into_nonsense(publisher: Publisher) -> None:
    publisher.act("service_role")
    publisher.conn.execute("update registry_limits set value = '2097152' where name = 'file_bytes'")
    with pytest.raises(psycopg.errors.CheckViolation), publisher.conn.transaction():
        publisher.conn.execute("""update registry_limits set value = '"big"' where name = 'file_bytes'""")
    with pytest.raises(psycopg.errors.CheckViolation), publisher.conn.transaction():
        publisher.conn.execute("update registry_limits set value = '[1]' where name = 'reserved_names'")


# -- the runner, whatever a plan holds --------------------------------------------------------


def _plan(paths: list[str]) -> Plan:
    import hashlib

    files = [PlanFile(p, hashlib.sha256(b"x").hexdigest(), 1, False, "x") for p in paths]
    return Plan(
        tool_id="t",
        version="1.0.0",
        tool_type="knowledge",
        content_hash=uuid.uuid4().hex * 2,
        primitive=None,
        executor_id=None,
        chain=[],
        config={},
        parameters=None,
        files=files,
    )


@pytest.mark.parametrize(
    ("paths", "wanted"),
    [
        (["x", "x/y"], "also the directory of x/y"),
        (["x/y", "x"], "also the directory of x/y"),
        (["a/" + "s" * 300], "cannot write file"),
        ([".KIWI-COMPLETE"], "reserved file name"),
    ],
)
def test_materialising_what_older_registries_took_is_a_refusal_not_a_traceback(
    tmp_path: Path, paths: list[str], wanted: str
) -> None:
    with pytest.raises(Refused, match=re.escape(wanted)):
        materialise(_plan(paths), tmp_path)
    leftovers = [p.name for p in (tmp_path / "tools").iterdir()] if (tmp_path / "tools").exists() else []
    assert leftovers == [], "a refused materialisation leaves nothing behind"


def test_an_unwritable_cache_is_a_refusal(tmp_path: Path) -> None:
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache directory should be")
    with pytest.raises(Refused, match="cannot write the tool's directory"):
        materialise(_plan(["a.txt"]), blocked)
