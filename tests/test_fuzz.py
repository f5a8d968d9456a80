"""Whatever comes in through the public entry points, no exception escapes that is not a KiwiError.

Hypothesis feeds random parameters to Runner.run, random manifests and files to
PostgresRegistry.publish and to `kiwi publish`, and random argument vectors to
runner.cli.main. Everything published uses the tool_id prefix FUZZ and is deleted.
Example counts are modest: many examples start a process or a connection pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import math
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from runner import (
    InvalidParameters,
    KiwiError,
    NotFound,
    PostgresRegistry,
    Refused,
    RegistryUnavailable,
    Runner,
    RunResult,
    Settings,
    UsageError,
    local_owner,
)
from runner.cli.main import main, run_json
from runner.harness.result import RESULT_KEYS
from tests.conftest import local_settings

FUZZ = f"fuzz_{uuid.uuid4().hex[:8]}"
BASE = f"{FUZZ}_base"  # an existing tool, so that random publishes also meet version conflicts
EXIT_CODES = {0, 1, 2, 3, 4, 5, 124}
FEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- strategies -------------------------------------------------------------------------------

keys = st.sampled_from(["name", "bytes", "binary", "", "\x00", "na\x00me", "näme", "NAME", "名前", "$ref"]) | st.text(
    max_size=8
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["\x00", "-e", "$(id)", "'; drop table tools; --", "\U0010ffff", "a" * 5000])
)
json_values = st.recursive(
    scalars, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(keys, kids, max_size=3), max_leaves=8
)
finite_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=3),
    max_leaves=8,
)

params_strategy = st.one_of(
    st.dictionaries(keys, json_values, max_size=4),
    st.fixed_dictionaries({}, optional={"name": json_values, "bytes": json_values, "binary": json_values}),
    st.fixed_dictionaries({"name": st.text(max_size=30)}),
    st.fixed_dictionaries(
        {"bytes": st.integers(min_value=-(2**66), max_value=2**66)}, optional={"binary": st.booleans()}
    ),
)


file_paths = st.sampled_from(
    [
        "run.sh",
        "main.py",
        "a/b.txt",
        "../x",
        "/etc/passwd",
        "a/../b",
        "./x",
        "a//b",
        "",
        "a\x00b",
        "ü.txt",
        "a\\b",
        "c:d",
    ]
) | st.text(max_size=10)
files_strategy = st.lists(
    st.fixed_dictionaries(
        {"path": file_paths},
        optional={
            "content_text": st.text(max_size=40),
            "is_entrypoint": st.booleans(),
            "media_type": st.sampled_from(["text/plain", "text/x-shellscript", ""]),
            "storage_key": st.text(max_size=5),
            "sha256": st.text(max_size=5),
        },
    )
    | finite_json,
    max_size=3,
)


def manifests(text: st.SearchStrategy[str], values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Dicts built from the manifest's keys, each value sometimes right and often not. A string
    tool_id always starts with FUZZ (or is invalid), so nothing outside this suite is touched."""
    tool_ids = st.one_of(
        st.builds(lambda s: f"{FUZZ}_{s}", st.text(alphabet="abz09_.-/", max_size=6)),
        st.sampled_from([BASE, f"public/{FUZZ}_ns", f"nosuchns/{FUZZ}_ns", f"{FUZZ}_" + "x" * 130]),
        text.map(lambda s: f"! {s}"),
        values.filter(lambda v: not isinstance(v, str)),
    )
    types = ["primitive", "runtime", "mcp_server", "mcp_tool", "script", "api", "directive", "knowledge", "composite"]
    parameters = st.one_of(
        st.lists(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["word", "n", "1bad", "", "a b"]) | text},
                optional={
                    "type": st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "date"]),
                    "required": st.booleans() | values,
                    "default": values,
                    "enum": st.lists(values, max_size=3) | values,
                    "description": text | values,
                    "bogus": values,
                },
            ),
            max_size=3,
        ),
        st.fixed_dictionaries(
            {},
            optional={
                "type": st.sampled_from(["object", "array"]) | values,
                "properties": st.dictionaries(text, st.fixed_dictionaries({"type": st.just("string")}) | values),
                "required": st.lists(text, max_size=2) | values,
                "additionalProperties": st.booleans() | values,
            },
        ),
        values,
    )
    fields = {
        "tool_id": tool_ids,
        "tool_type": st.sampled_from([*types, "", "Script", "tool"]) | values,
        "version": st.sampled_from(["1.0.0", "1.0.1", "2.0.0-rc.1", "01.0.0", "1.0", "1.0.0+build", ""]) | values,
        "executor": st.sampled_from(["bash_runtime", "python_runtime", "subprocess", "http_client", "hello_world"])
        | st.sampled_from(["no_such_runtime", "a/b", "", "../x"])
        | values,
        "entrypoint": st.sampled_from(["run.sh", "main.py", "../run.sh", "/etc/passwd"]) | text | values,
        "parameters": parameters,
        "config": st.fixed_dictionaries({}, optional={"timeout_s": values, "command": text, "args": values})
        | st.dictionaries(text, values, max_size=3)
        | values,
        "tags": st.lists(text, max_size=3) | values,
        "name": text | values,
        "description": text | values,
        "visibility": st.sampled_from(["public", "unlisted", "private", "everyone"]) | values,
        "namespace": st.sampled_from(["public", "nosuchns", "Bad NS"]) | values,
        "outputs": values,
        "changelog": text,
    }
    extra = st.dictionaries(text, values, max_size=2)
    return st.tuples(st.fixed_dictionaries({}, optional=fields), extra).map(lambda pair: {**pair[1], **pair[0]})


@st.composite
def near_valid(draw: st.DrawFn, values: st.SearchStrategy[Any]) -> tuple[dict[str, Any], list[Any]]:
    """A publishable knowledge entry or Bash script, or the existing BASE tool again with other
    content (a version conflict), then sometimes one field replaced by something random."""
    kind = draw(st.sampled_from(["knowledge", "script", "base"]))
    tool_id = BASE if kind == "base" else f"{FUZZ}_{kind}_{draw(st.integers(0, 3))}"
    manifest: dict[str, Any] = {
        "tool_id": draw(st.sampled_from([tool_id, f"public/{tool_id}", f"nosuchns/{tool_id}"])),
        "tool_type": "knowledge" if kind != "script" else "script",
        "version": draw(st.sampled_from(["1.0.0", "1.0.0", "1.1.0", "0.1.0-alpha"])),
        "description": draw(st.text(max_size=20)),
    }
    if kind == "script":
        manifest.update(executor="bash_runtime", entrypoint="run.sh")
        manifest["parameters"] = [{"name": "word", "type": draw(st.sampled_from(["string", "integer"]))}]
    files = [{"path": "run.sh" if kind == "script" else "README.md", "content_text": draw(st.text(max_size=30))}]
    if kind == "script":
        files[0]["is_entrypoint"] = True
    if draw(st.booleans()):
        target = draw(st.sampled_from(["manifest", "files"]))
        if target == "manifest":
            # never tool_id: a random string there is often a valid id outside the fuzz prefix
            # (regression: "q", "0" and "run.sh" were published and left behind)
            keys = [k for k in manifest if k != "tool_id"]
            manifest[draw(st.sampled_from([*keys, "name", "tags", "config", "visibility", "junk"]))] = draw(values)
        else:
            files[0][draw(st.sampled_from(["path", "content_text", "is_entrypoint", "media_type"]))] = draw(values)
    return manifest, files


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def admin(database_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(database_url, autocommit=True) as connection:
        refs = "select coalesce(array_agg(ref), '{}') from tools where tool_id not like %s"
        before = set(connection.execute(refs, (f"{FUZZ}%",)).fetchone()[0])
        yield connection
        connection.execute("delete from tools where tool_id like %s", (f"{FUZZ}%",))
        leaked = set(connection.execute(refs, (f"{FUZZ}%",)).fetchone()[0]) - before
        assert not leaked, f"the fuzz tests published tools outside their prefix: {sorted(leaked)}"


@pytest.fixture(scope="module")
def base_tool(admin: psycopg.Connection) -> str:
    admin.execute(
        "select publish_tool_version(%s::jsonb, '[]'::jsonb)",
        (json.dumps({"tool_id": BASE, "tool_type": "knowledge", "version": "1.0.0", "description": "fuzz base"}),),
    )
    return BASE


@pytest.fixture(scope="module")
def runner(
    database_url: str, loop: asyncio.AbstractEventLoop, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Runner]:
    cache = tmp_path_factory.mktemp("fuzz-cache")
    r = Runner(
        PostgresRegistry(database_url, principal=local_owner()),
        local_settings(database_url, cache),
    )
    yield r
    loop.run_until_complete(r.aclose())


@pytest.fixture(scope="module")
def registry(database_url: str, loop: asyncio.AbstractEventLoop) -> Iterator[PostgresRegistry]:
    r = PostgresRegistry(database_url, principal=local_owner())
    yield r
    loop.run_until_complete(r.aclose())


@pytest.fixture(scope="module")
def cli_env(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The environment `runner.cli.main` reads, set for the whole module; cwd is an empty directory."""
    workdir = tmp_path_factory.mktemp("fuzz-cwd")
    (workdir / "config.toml").write_text("[runs]\nrecord = false  # no junk tool ids in tool_runs\n")
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith(("KIWI_", "SUPABASE_")):
                mp.delenv(name)
        mp.setenv("KIWI_DATABASE_URL", database_url)
        mp.setenv("KIWI_CACHE_DIR", str(tmp_path_factory.mktemp("fuzz-cli-cache")))
        mp.chdir(workdir)
        yield workdir


def fuzz_rows(admin: psycopg.Connection) -> tuple[int, int, int]:
    """Everything this module could have written: tools, versions and files under the FUZZ prefix."""
    return admin.execute(
        """select (select count(*) from tools where tool_id like %(p)s),
                  (select count(*) from tool_versions v join tools t on t.id = v.tool_uuid where t.tool_id like %(p)s),
                  (select count(*) from tool_version_files f join tool_versions v on v.id = f.version_id
                     join tools t on t.id = v.tool_uuid where t.tool_id like %(p)s)""",
        {"p": f"{FUZZ}%"},
    ).fetchone()


def forget(admin: psycopg.Connection, answer: dict[str, Any]) -> None:
    """Delete what a successful publish made (the base tool stays until the module ends)."""
    tool_id = str(answer["tool_id"]).rpartition("/")[2]
    assert tool_id.startswith(FUZZ), f"published outside the fuzz prefix: {answer}"
    if tool_id != BASE:
        admin.execute("delete from tools where tool_id = %s and namespace = %s", (tool_id, answer["namespace"]))


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


# --- Runner.run -------------------------------------------------------------------------------


def check_result(result: Any) -> None:
    assert isinstance(result, RunResult)
    event(f"{result.status} {type(result.failure).__name__ if result.failure else ''}")
    assert result.status in {"success", "error"}, result.status
    if result.status == "error":
        ran_and_failed = result.failure is None and result.exit_code not in (None, 0)
        assert isinstance(result.failure, KiwiError) or ran_and_failed, result
        assert result.error
    shown = run_json(result)
    assert list(shown) == list(RESULT_KEYS)
    json.dumps(shown, ensure_ascii=False, default=str)


@FEW
@given(params=params_strategy)
def test_hello_world_takes_any_parameters_without_raising(
    params: dict[str, Any], runner: Runner, loop: asyncio.AbstractEventLoop
) -> None:
    result = loop.run_until_complete(runner.run("hello_world", params))
    check_result(result)
    if set(params) - {"name"}:
        assert isinstance(result.failure, InvalidParameters), "hello_world has one parameter"


@FEW
@given(params=params_strategy)
def test_format_bytes_takes_any_parameters_without_raising(
    params: dict[str, Any], runner: Runner, loop: asyncio.AbstractEventLoop
) -> None:
    result = loop.run_until_complete(runner.run("format_bytes", params))
    check_result(result)
    if not isinstance(params.get("bytes"), int | float) or isinstance(params["bytes"], bool):
        assert isinstance(result.failure, InvalidParameters), "bytes is a required integer"


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"name": float("nan")}, "name: must be a finite number"),
        ({"name": ["x", float("inf")]}, "name.1: must be a finite number"),
        ({"name": {1, 2}}, "name: must be a JSON value, not set"),
        ({1: "x"}, "parameter names must be valid Unicode text"),
    ],
)
async def test_parameters_json_cannot_carry_are_invalid(
    params: dict[Any, Any], says: str, runner_async: Runner
) -> None:
    """Regression (runner/core/params.py): NaN reached tools as the non-JSON token NaN, a set crashed
    the stdin encoder, and a non-text name crashed the error message's sort (TypeError)."""
    result = await runner_async.run("hello_world", params)
    assert isinstance(result.failure, InvalidParameters), result
    assert says in result.error


@pytest.fixture
async def runner_async(make_settings: Callable[..., Settings], make_runner: Callable[..., Runner]) -> Any:
    return make_runner(make_settings(record_runs=False))


# --- publish ----------------------------------------------------------------------------------


@settings(FEW, max_examples=80)
@given(
    given_=st.one_of(
        st.tuples(manifests(st.text(max_size=10), finite_json), files_strategy),
        near_valid(finite_json | file_paths),
        near_valid(finite_json | file_paths),
    )
)
def test_registry_publish_ends_published_or_refused_with_a_reason(
    given_: tuple[dict[str, Any], list[Any]],
    registry: PostgresRegistry,
    loop: asyncio.AbstractEventLoop,
    admin: psycopg.Connection,
    base_tool: str,
) -> None:
    manifest, files = given_
    before = fuzz_rows(admin)
    try:
        answer = loop.run_until_complete(registry.publish(manifest, files))
    except KiwiError as e:
        event(f"refused: {type(e).__name__}")
        assert e.message
        assert not isinstance(e, RegistryUnavailable), e
        assert isinstance(e, UsageError | Refused | NotFound), repr(e)
        assert fuzz_rows(admin) == before, "a refused publish leaves the registry as it was"
        return
    event("published")
    forget(admin, answer)


tool_yaml = st.one_of(
    manifests(st.text(max_size=10), finite_json).map(lambda m: yaml.safe_dump(m, allow_unicode=True).encode()),
    near_valid(finite_json).map(lambda mf: yaml.safe_dump(mf[0], allow_unicode=True).encode()),
    manifests(st.text(max_size=10), finite_json).map(lambda m: json.dumps(m).encode()),
    st.text(max_size=60).map(str.encode),
    st.sampled_from([b"\xff\xfe", b"[", b": :", b"a: &a [*a]", b"tool_id: !!python/object:os.system x", b"- 1"]),
    st.none(),
)
disk_names = st.text(
    alphabet=st.characters(blacklist_characters="/\x00", blacklist_categories=["Cs"]), min_size=1, max_size=12
).filter(lambda s: s not in {".", ".."})
disk_files = st.dictionaries(
    st.lists(disk_names, min_size=1, max_size=2).map(tuple),
    st.text(max_size=40).map(str.encode) | st.binary(max_size=20),
    max_size=3,
)


@FEW
@given(manifest_yaml=tool_yaml, files=disk_files)
def test_kiwi_publish_ends_published_or_refused_with_a_reason(
    manifest_yaml: bytes | None,
    files: dict[tuple[str, ...], bytes],
    cli_env: Path,
    admin: psycopg.Connection,
    base_tool: str,
) -> None:
    with tempfile.TemporaryDirectory(dir=cli_env) as tmp:
        root = Path(tmp)
        for parts, content in files.items():
            target = root.joinpath(*parts)
            with contextlib.suppress(OSError):  # "a" as a file and "a/b" as well: keep the first
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
        if manifest_yaml is not None:
            with contextlib.suppress(OSError):  # a directory named tool.yaml
                (root / "tool.yaml").write_bytes(manifest_yaml)
        before = fuzz_rows(admin)
        code, out, err = cli("publish", str(root), "--json")
    assert code in {0, 2, 3, 4}, (code, err)
    event(f"exit {code}")
    if code == 0:
        forget(admin, json.loads(out))
        return
    assert err.startswith("kiwi: ") and len(err) > len("kiwi: \n"), err
    assert set(json.loads(out)) == {"error"}
    assert fuzz_rows(admin) == before, "a refused publish leaves the registry as it was"


# --- the command line -------------------------------------------------------------------------

TOOLS = ["hello_world", "hello_world@1.0.0", "hello_world@", "@", "format_bytes", "no_such_tool", "kiwi_tool_authoring"]
OPTIONS = [
    "-p", "name=Ada", "bytes=12", "bytes=NaN", "novalue", "=x", "--params", '{"name": "Bo"}', "[1]", "{bad", "NaN",
    "--version", "1.0.0", "9.9.9", "--dry-run", "--json", "--type", "script", "type:runtime", "--category",
    "--limit", "0", "5", "-1", "99999999999", "--tool", "-h", "--", "", "/nonexistent/kiwi", ".", "-",
]  # fmt: skip
words = st.sampled_from(OPTIONS) | st.sampled_from(OPTIONS) | st.sampled_from(TOOLS) | st.text(max_size=6)
commands = st.sampled_from(["run", "search", "show", "publish", "runs"])
structured = st.tuples(commands, st.sampled_from(TOOLS) | st.text(max_size=6), st.lists(words, max_size=5)).map(
    lambda t: [t[0], t[1], *t[2]]
)
argvs = st.one_of(
    structured,
    structured,
    st.tuples(commands, st.lists(words, max_size=4)).map(lambda t: [t[0], *t[1]]),
    st.lists(words, max_size=6),
)


@settings(max_examples=100, deadline=None)
@given(argv=argvs)
def test_any_argument_vector_ends_in_a_documented_exit_code(argv: list[str], cli_env: Path) -> None:
    try:
        code, _, err = cli(*argv)
    except SystemExit as e:  # argparse: 2 for bad usage, 0 for --help
        event(f"SystemExit({e.code})")
        assert e.code in (0, 2), e.code
        return
    event(f"exit {code}")
    assert isinstance(code, int) and code in EXIT_CODES, (code, err)
    assert "Traceback" not in err


# --- known bugs in files this suite does not own (strict: they fail loudly once fixed) ---------


def test_as_json_of_a_result_holding_invalid_parameters() -> None:
    result = RunResult("t", None, "error", error="bad", failure=InvalidParameters("t", ["x: required"]))
    assert result.as_json()["status"] == "error"


@pytest.mark.parametrize(
    "params",
    [{"name": "\ud800"}, {"\udfff": 1}, {1: "x", "name": "y"}, ["name", "Ada"]],
    ids=["surrogate value", "surrogate key", "mixed key types", "a list"],
)
async def test_runner_run_reports_unrepresentable_parameters(params: Any, database_url: str, tmp_path: Path) -> None:
    r = Runner(
        PostgresRegistry(database_url, principal=local_owner()),
        local_settings(database_url, tmp_path),
    )
    try:
        result = await r.run("hello_world", params)
    finally:
        await r.aclose()
    assert isinstance(result.failure, InvalidParameters)


@pytest.mark.parametrize(
    ("manifest", "files"),
    [
        ({"tool_id": f"{FUZZ}_nul", "tool_type": "knowledge", "version": "1.0.0", "name": "a\x00b"}, []),
        (
            {"tool_id": f"{FUZZ}_nul", "tool_type": "knowledge", "version": "1.0.0"},
            [{"path": "a", "content_text": "\x00"}],
        ),
        ({"tool_id": f"{FUZZ}_nan", "tool_type": "knowledge", "version": "1.0.0", "config": {"x": math.nan}}, []),
    ],
    ids=["nul in manifest", "nul in file", "nan"],
)
async def test_registry_publish_reports_bad_text_as_a_usage_error(
    manifest: dict[str, Any], files: list[Any], database_url: str
) -> None:
    async with PostgresRegistry(database_url, principal=local_owner()) as registry:
        with pytest.raises(UsageError):
            await registry.publish(manifest, files)


async def test_registry_publish_reports_a_nul_in_manifest_yaml_as_a_usage_error(database_url: str) -> None:
    manifest = {"tool_id": f"{FUZZ}_nul", "tool_type": "knowledge", "version": "1.0.0"}
    async with PostgresRegistry(database_url, principal=local_owner()) as registry:
        with pytest.raises(UsageError):
            await registry.publish(manifest, [], "tool_id: x\x00")
