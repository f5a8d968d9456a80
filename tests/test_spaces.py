"""Local spaces (runner/registry/spaces.py): tools as code in .ai/tools and ~/.ai/tools.

`kiwi run` resolves the project space, then the user space, then the registry; `kiwi pull`
writes a published version into a space and `kiwi publish TOOL` pushes one back, keeping
tool.yaml as written. The CLI runs as a process with KIWI_PROJECT_DIR and KIWI_USER_SPACE
pointing into tmp_path (never the real home), against the real database.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg.types.json import Jsonb

from runner import Refused, Settings, UsageError, local_owner
from runner.registry import spaces
from tests.conftest import local_settings
from tests.kiwi_cli import Done, kiwi_env, run_kiwi

ROOT = Path(__file__).resolve().parent.parent
ECHO = '#!/usr/bin/env bash\nprintf \'{"from": "%s", "word": "%s"}\\n\' "{where}" "$KIWI_PARAM_WORD"\n'


@dataclass
class Project:
    """A project directory and a user space, both empty to begin with."""

    dir: Path
    user: Path

    @property
    def space(self) -> Path:
        return self.dir / ".ai" / "tools"


Kiwi = Callable[..., Done]


@pytest.fixture
def project(tmp_path: Path) -> Project:
    (tmp_path / "project").mkdir()
    return Project(dir=tmp_path / "project", user=tmp_path / "user-space")


@pytest.fixture
def kiwi(database_url: str, tmp_path: Path, project: Project) -> Kiwi:
    """`kiwi(*args, project=...)`: the CLI as a process, in an empty directory, with the spaces in tmp_path."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()

    def run(*args: str, project: Project = project) -> Done:
        env = kiwi_env(
            database_url, tmp_path / "cache", KIWI_PROJECT_DIR=str(project.dir), KIWI_USER_SPACE=str(project.user)
        )
        return run_kiwi(args, cwd=cwd, env=env)

    return run


@pytest.fixture
def delete_later(conn: psycopg.Connection) -> Iterator[list[str]]:
    refs: list[str] = []
    yield refs
    for ref in reversed(refs):
        conn.execute("delete from tools where ref = %s", (ref,))


def unique(stem: str) -> str:
    return f"{stem}_{uuid.uuid4().hex[:8]}"


def local_tool(folder: Path, tool_id: str, where: str, *, executor: str = "bash_runtime", extra: str = "") -> Path:
    """A Bash script tool in `folder` that says where it comes from and echoes its `word`."""
    folder.mkdir(parents=True)
    (folder / "tool.yaml").write_text(
        f"tool_id: {tool_id}\ntool_type: script\nexecutor: {executor}\nversion: 0.1.0\nentrypoint: echo.sh\n"
        f"parameters:\n  - {{name: word, type: string, default: hi}}\n{extra}"
    )
    (folder / "echo.sh").write_text(ECHO.replace("{where}", where))
    return folder


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def settings_for(project: Project) -> Settings:
    return local_settings("", project.dir / "cache", project_dir=project.dir, user_space=project.user)


# --- resolution: project, then user, then registry -------------------------------------------


def test_a_project_tool_shadows_the_registry_and_registry_skips_it(kiwi: Kiwi, project: Project) -> None:
    """Its identity is its manifest's tool_id, not its folder's name (hello/ holds hello_world)."""
    (project.space / "hello").mkdir(parents=True)
    (project.space / "hello" / "tool.yaml").write_text(
        "tool_id: hello_world\ntool_type: script\nexecutor: bash_runtime\nversion: 1.0.0\nentrypoint: hello.sh\n"
        "parameters:\n  - {name: name, type: string, default: world}\n"
    )
    (project.space / "hello" / "hello.sh").write_text('printf \'{"local": "%s"}\' "$KIWI_PARAM_NAME"\n')

    local = kiwi("run", "hello_world", "-p", "name=Ada", "--json")
    assert local.code == 0, local.err
    assert local.json()["output"] == {"local": "Ada"}
    assert local.json()["executor_chain"] == ["hello_world", "bash_runtime", "subprocess"]

    registry = kiwi("run", "hello_world", "-p", "name=Ada", "--json", "--registry")
    assert registry.code == 0, registry.err
    assert registry.json()["output"] == {"greeting": "Hello, Ada!"}

    pinned = kiwi("run", "hello_world@1.0.0", "-p", "name=Ada", "--json")
    assert pinned.json()["output"] == {"greeting": "Hello, Ada!"}, "a pinned version is a published one"


def test_the_project_space_shadows_the_user_space(kiwi: Kiwi, project: Project) -> None:
    tool_id = unique("space_both")  # in no registry: local spaces alone
    local_tool(project.user / "mine", tool_id, "user")
    assert kiwi("run", tool_id, "-p", "word=a", "--json").json()["output"] == {"from": "user", "word": "a"}
    local_tool(project.space / "group" / tool_id, tool_id, "project")
    done = kiwi("run", tool_id, "-p", "word=b", "--json")
    assert done.code == 0, done.err
    assert done.json()["output"] == {"from": "project", "word": "b"}
    assert done.json()["version"] == "0.1.0"
    gone = kiwi("run", tool_id, "--registry", "--json")
    assert gone.code == 3 and f'tool "{tool_id}" not found' in gone.json()["error"]


def test_a_local_tool_on_an_unknown_executor_fails_naming_both(kiwi: Kiwi, project: Project) -> None:
    tool_id = unique("space_orphan")
    local_tool(project.space / tool_id, tool_id, "project", executor="no_such_runtime")
    done = kiwi("run", tool_id, "--json")
    assert done.code == 3, done.err
    assert done.json()["status"] == "error"
    assert f'executor "no_such_runtime" of tool "{tool_id}" not found' in done.json()["error"]


def test_a_local_tool_is_validated_as_publish_validates_it(kiwi: Kiwi, project: Project) -> None:
    tool_id = unique("space_bad")
    local_tool(project.space / tool_id, tool_id, "project", extra="visibility: everyone\n")
    done = kiwi("run", tool_id)
    assert done.code == 2
    assert "visibility" in done.err and "everyone" in done.err


def test_two_tools_of_one_identity_in_a_space_is_an_error_naming_both(kiwi: Kiwi, project: Project) -> None:
    tool_id = unique("space_twice")
    local_tool(project.space / "a", tool_id, "a")
    local_tool(project.space / "b", tool_id, "b")
    done = kiwi("run", tool_id)
    assert done.code == 2
    assert str(project.space / "a" / "tool.yaml") in done.err and str(project.space / "b" / "tool.yaml") in done.err


def test_identity_follows_the_manifests_namespace(project: Project) -> None:
    local_tool(project.space / "one", "acme/tool_one", "x")
    local_tool(project.space / "two", "tool_two", "x", extra="namespace: acme\n")
    local_tool(project.space / ".hidden" / "three", "tool_three", "x")
    settings = settings_for(project)
    assert spaces.find("acme/tool_one", settings).path == project.space / "one"
    assert spaces.find("acme/tool_two", settings).path == project.space / "two"
    assert spaces.find("tool_two", settings) is None, "tool_two is acme's, not public's"
    assert spaces.find("public/acme", settings) is None
    assert spaces.find("tool_three", settings) is None, "hidden folders are skipped"


def test_finding_no_local_tool_loads_no_yaml(tmp_path: Path) -> None:
    """`kiwi run` of a registry tool must not pay for PyYAML: not with no spaces, nor with
    spaces whose tool.yaml files do not mention the tool asked for."""
    space = tmp_path / "project" / ".ai" / "tools" / "other"
    space.mkdir(parents=True)
    (space / "tool.yaml").write_text("tool_id: something_else\n")
    probe = (
        "import sys; from pathlib import Path; from runner.harness import run; from runner.registry import spaces; "
        "from runner.config import Settings; "
        f"s = Settings(backend='postgres', database_url='', supabase_url=None, supabase_key=None, "
        f"cache_dir=Path('c'), project_dir=Path({str(tmp_path / 'project')!r}), user_space=Path('/nonexistent')); "
        "assert spaces.find('hello_world', s) is None; print('yaml' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT, env={**os.environ}
    )
    assert done.stdout.strip() == "False"


# --- publish from a space, pull back ---------------------------------------------------------

ODD_YAML = """# A tool kept as code: these comments, the odd spacing and the key order must survive.
tool_id:    {tool_id}
tool_type: script     # a Bash script
executor:  "bash_runtime"
version: '1.0.0'
description: >
  Echoes a word,
  folded over two lines.
entrypoint: echo.sh
tags: [ demo,   round-trip ]
parameters:
    -   name: word
        type: string
        default: hi
config: {{timeout: 9}}
# trailing comment, no newline at the end"""


def test_publish_from_a_space_then_pull_into_another_project_is_byte_identical(
    kiwi: Kiwi, project: Project, tmp_path: Path, delete_later: list[str]
) -> None:
    tool_id = unique("space_round_trip")
    folder = project.space / "odd"
    folder.mkdir(parents=True)
    (folder / "tool.yaml").write_text(ODD_YAML.format(tool_id=tool_id))
    (folder / "echo.sh").write_text(ECHO.replace("{where}", "published"))
    (folder / "lib").mkdir()
    (folder / "lib" / "notes.md").write_text("# notes\n\nünïcode, tabs\tand no final newline")
    (folder / "lib" / "windows.txt").write_bytes(b"line endings\r\nkept as written\r\n")

    published = kiwi("--admin", "publish", tool_id, "--json")  # a tool of the space, not a directory
    assert published.code == 0, published.err
    delete_later.append(tool_id)
    assert published.json()["tool_id"] == tool_id and published.json()["files"] == 3

    other = Project(dir=tmp_path / "other", user=tmp_path / "other-user")
    other.dir.mkdir()
    pulled = kiwi("pull", tool_id, "--json", project=other)
    assert pulled.code == 0, pulled.err
    assert pulled.json() | {"path": None} == {
        "tool_id": tool_id,
        "version": "1.0.0",
        "path": None,
        "space": "project",
        "changed": True,
        "files": 3,
    }
    assert Path(pulled.json()["path"]) == other.space / tool_id
    assert tree(other.space / tool_id) == tree(folder), "tool.yaml and every file, byte for byte"

    again = kiwi("pull", tool_id, project=other)
    assert again.code == 0 and again.out.startswith(f"unchanged: {tool_id}@1.0.0")
    ran = kiwi("run", tool_id, "-p", "word=back", "--json", project=other)
    assert ran.json()["output"] == {"from": "published", "word": "back"}
    assert kiwi("--admin", "publish", tool_id, project=other).out.startswith(f"unchanged: {tool_id}@1.0.0")


def test_pull_into_the_user_space_and_of_a_pinned_version(
    kiwi: Kiwi, project: Project, publish_tool: Callable[..., str]
) -> None:
    tool_id = publish_tool("space_pinned", {"tool_type": "knowledge"}, {"a.md": "one"})
    pulled = kiwi("pull", f"{tool_id}@1.0.0", "--user")
    assert pulled.code == 0, pulled.err
    assert pulled.out.startswith(f"pulled: {tool_id}@1.0.0 -> {project.user / tool_id} (user space)")
    assert (project.user / tool_id / "a.md").read_text() == "one"
    written = (project.user / tool_id / "tool.yaml").read_text()
    assert f"tool_id: {tool_id}" in written, "published without YAML: the manifest is dumped"
    assert not project.space.exists()
    missing = kiwi("pull", f"{tool_id}@9.9.9")
    assert missing.code == 3 and "9.9.9" in missing.err


def test_pull_refuses_to_overwrite_a_different_copy_without_force(
    kiwi: Kiwi, project: Project, publish_tool: Callable[..., str]
) -> None:
    tool_id = publish_tool("space_force", {"tool_type": "knowledge"}, {"a.md": "published"})
    assert kiwi("pull", tool_id).code == 0
    copy = project.space / tool_id
    (copy / "a.md").write_text("edited locally")
    (copy / "extra.md").write_text("new")

    refused = kiwi("pull", tool_id)
    assert refused.code == 4
    assert str(copy) in refused.err and "--force" in refused.err
    assert (copy / "a.md").read_text() == "edited locally", "nothing was touched"

    forced = kiwi("pull", tool_id, "--force")
    assert forced.code == 0, forced.err
    assert sorted(tree(copy)) == ["a.md", "tool.yaml"] and (copy / "a.md").read_text() == "published"


def test_pull_writes_over_the_spaces_copy_wherever_it_lives(
    kiwi: Kiwi, project: Project, publish_tool: Callable[..., str]
) -> None:
    """Identity is the manifest's: a copy moved to another folder is the one pull updates."""
    tool_id = publish_tool("space_moved", {"tool_type": "knowledge"}, {"a.md": "published"})
    assert kiwi("pull", tool_id).code == 0
    (project.space / tool_id).rename(project.space / "renamed")
    again = kiwi("pull", tool_id, "--json")
    assert again.json()["changed"] is False and again.json()["path"] == str(project.space / "renamed")


@pytest.mark.parametrize("path", ["../escape.txt", "/etc/kiwi-escape", "a/../../escape.txt", "./a", "a//b", "C:x"])
def test_pull_refuses_paths_that_leave_the_tool(path: str, tmp_path: Path) -> None:
    source = {
        "tool_id": "evil",
        "namespace": "public",
        "version": "1.0.0",
        "manifest": {"tool_id": "evil", "tool_type": "knowledge", "version": "1.0.0"},
        "manifest_yaml": None,
        "files": [{"path": "ok.md", "content_text": "ok"}, {"path": path, "content_text": "gotcha"}],
    }
    with pytest.raises(Refused, match="relative and stay inside"):
        spaces.write(source, tmp_path / "space", "project")
    assert not (tmp_path / "space").exists() and not (tmp_path / "escape.txt").exists()


def test_pull_refuses_a_tool_folder_that_resolves_outside_the_space(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "space").mkdir()
    (tmp_path / "space" / "evil").symlink_to(outside)
    source = {
        "tool_id": "evil",
        "namespace": "public",
        "version": "1.0.0",
        "manifest": {"tool_id": "evil", "tool_type": "knowledge", "version": "1.0.0"},
        "files": [{"path": "a.md", "content_text": "x"}],
    }
    with pytest.raises(Refused, match="outside"):
        spaces.write(source, tmp_path / "space", "project")
    assert list(outside.iterdir()) == []


def test_a_manifest_yaml_that_disagrees_with_its_manifest_is_not_written(tmp_path: Path) -> None:
    source = {
        "tool_id": "acme/liar",
        "namespace": "acme",
        "version": "1.0.0",
        "manifest": {"tool_id": "acme/liar", "tool_type": "knowledge", "version": "1.0.0"},
        "manifest_yaml": "tool_id: acme/liar\ntool_type: knowledge\nversion: 2.0.0\n",
        "files": [],
    }
    pulled = spaces.write(source, tmp_path, "user")
    assert pulled.path == tmp_path / "acme" / "liar", "outside public, under the namespace's folder"
    assert "version: 1.0.0" in (pulled.path / "tool.yaml").read_text()


def test_publish_of_something_neither_a_directory_nor_a_local_tool_is_a_usage_error(kiwi: Kiwi) -> None:
    done = kiwi("publish", unique("space_nowhere"))
    assert done.code == 2 and "nor a tool of a local space" in done.err


# --- the preview plan ---------------------------------------------------------------------------


def test_a_published_tools_manifest_and_files_preview_to_its_plan(
    conn: psycopg.Connection, publish_tool: Callable[..., str]
) -> None:
    runtime = publish_tool(
        "space_rt", {"tool_type": "runtime", "executor": "bash_runtime", "config": {"env": {"A": "rt", "B": "rt"}}}
    )
    tool = publish_tool(
        "space_preview",
        {
            "tool_type": "script",
            "executor": runtime,
            "config": {"env": {"B": "tool"}, "timeout_s": 3},
            "parameters": [{"name": "n", "type": "integer", "required": True}],
        },
        {"run.sh": "echo $1\n", "lib/x.txt": "x"},
        entrypoint="run.sh",
    )
    manifest, files = conn.execute(
        "select v.manifest, (select jsonb_agg(jsonb_build_object('path', f.path, 'content_text', f.content_text))"
        "  from tool_version_files f where f.version_id = v.id)"
        " from tool_versions v join tools t on t.id = v.tool_uuid where t.ref = %s",
        (tool,),
    ).fetchone()
    preview = conn.execute("select preview_execution_plan(%s, %s)", (Jsonb(manifest), Jsonb(files))).fetchone()[0]
    plan = conn.execute("select resolve_execution_plan(%s)", (tool,)).fetchone()[0]
    for key in ("config", "chain", "parameters", "content_hash", "files", "primitive", "executor_id"):
        assert preview[key] == plan[key], key
    assert preview.pop("shadows") == "1.0.0", "a preview names the registry version it shadows"
    assert preview == plan
    assert plan["config"]["env"] == {"A": "rt", "B": "tool"}


def test_a_local_plan_is_marked_with_its_space(project: Project, database_url: str) -> None:
    import asyncio

    from runner import PostgresRegistry, Runner

    tool_id = unique("space_source")
    local_tool(project.user / tool_id, tool_id, "user")

    async def plans() -> tuple[str, str, str]:
        settings = settings_for(project)
        runner = Runner(PostgresRegistry(database_url, principal=local_owner()), settings)
        try:
            local = await runner.plan(tool_id)
            registry = await runner.plan("hello_world")
            runner.local_spaces = False
            with pytest.raises(Exception, match="not found"):
                await runner.plan(tool_id)
            return local.source, local.tool_id, registry.source
        finally:
            await runner.aclose()

    assert asyncio.run(plans()) == ("user", tool_id, "registry")


def test_a_broken_tool_yaml_named_like_the_tool_is_reported(project: Project) -> None:
    folder = project.space / "broken_one"
    folder.mkdir(parents=True)
    (folder / "tool.yaml").write_text("tool_id: broken_one\nparameters: [\n")
    with pytest.raises(UsageError, match="not valid YAML"):
        spaces.find("broken_one", settings_for(project))
