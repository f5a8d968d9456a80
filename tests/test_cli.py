"""The kiwi command line as people and scripts use it: real processes, the real database.

Each test runs `python -m runner.cli` in an empty directory (so no config.toml is read),
with KIWI_DATABASE_URL and KIWI_CACHE_DIR set, and checks exit codes, stdout and stderr.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runner.cli.main import main
from tests.kiwi_cli import Done, kiwi_env, run_kiwi

ROOT = Path(__file__).resolve().parent.parent
CONTRACT_KEYS = {"tool_id", "version", "status", "output", "error", "exit_code", "duration_ms", "executor_chain"}
SAY = '#!/usr/bin/env bash\nprintf \'{"said": "%s"}\\n\' "$KIWI_PARAM_WORD"\n'


Kiwi = Callable[..., Done]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kiwi-cli-cache")


@pytest.fixture
def kiwi(database_url: str, cache_dir: Path, tmp_path: Path) -> Kiwi:
    """`kiwi(*args, env=...)`: run the CLI as a process in an empty directory."""
    workdir = tmp_path / "cwd"
    workdir.mkdir()

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> Done:
        return run_kiwi(args, cwd=workdir, env={**kiwi_env(database_url, cache_dir), **(env or {})}, timeout=timeout)

    return run


@pytest.fixture
def delete_later(conn: psycopg.Connection) -> Iterator[list[str]]:
    """Tool refs that `kiwi publish` made in a test; deleted afterwards."""
    refs: list[str] = []
    yield refs
    for ref in reversed(refs):
        conn.execute("delete from tools where ref = %s", (ref,))


def unique(stem: str) -> str:
    return f"{stem}_{uuid.uuid4().hex[:8]}"


def tool_dir(root: Path, tool_id: str, script: str = SAY, **extra: Any) -> Path:
    """A publishable directory: tool.yaml (a Bash script tool with one `word` parameter) and say.sh."""
    directory = root / tool_id
    directory.mkdir()
    lines = [
        f"tool_id: {tool_id}",
        "tool_type: script",
        "executor: bash_runtime",
        "version: 1.0.0",
        "description: Says a word back.",
        "entrypoint: say.sh",
        "parameters:",
        "  - name: word",
        "    type: string",
        "    required: true",
        *(f"{k}: {v}" for k, v in extra.items()),
    ]
    (directory / "tool.yaml").write_text("\n".join(lines) + "\n")
    (directory / "say.sh").write_text(script)
    return directory


def versions_of(conn: psycopg.Connection, tool_id: str) -> list[tuple[str, str]]:
    return conn.execute(
        "select v.version, v.content_hash from tool_versions v join tools t on t.id = v.tool_uuid"
        " where t.ref = %s order by v.version",
        (tool_id,),
    ).fetchall()


def runs_of(conn: psycopg.Connection, tool_id: str) -> int:
    return conn.execute("select count(*) from tool_runs where tool_id = %s", (tool_id,)).fetchone()[0]


# --- kiwi run ------------------------------------------------------------------------------


def test_run_json_prints_exactly_the_contract_object(kiwi: Kiwi) -> None:
    done = kiwi("run", "hello_world", "-p", "name=Ada", "--json")
    assert done.code == 0, done.err
    assert len(done.out.strip().splitlines()) == 1, "one JSON object, on one line"
    result = done.json()
    assert set(result) == CONTRACT_KEYS
    assert result["status"] == "success" and result["error"] is None
    assert result["output"] == {"greeting": "Hello, Ada!"}
    assert result["executor_chain"] == ["hello_world", "bash_runtime", "subprocess"]
    assert result["tool_id"] == "hello_world" and result["version"] == "1.0.0" and result["exit_code"] == 0
    assert isinstance(result["duration_ms"], int | float)


def test_run_for_people_prints_the_result_on_stdout_and_a_status_line_on_stderr(kiwi: Kiwi) -> None:
    done = kiwi("run", "hello_world", "-p", "name=Ada")
    assert done.code == 0, done.err
    assert json.loads(done.out) == {"greeting": "Hello, Ada!"}
    assert "success: hello_world@1.0.0 via hello_world -> bash_runtime -> subprocess" in done.err


def test_params_as_one_json_object(kiwi: Kiwi) -> None:
    done = kiwi("run", "hello_world", "--params", '{"name": "Bo"}', "--json")
    assert done.code == 0, done.err
    assert done.json()["output"] == {"greeting": "Hello, Bo!"}


def test_p_values_are_read_as_the_schema_types(kiwi: Kiwi) -> None:
    done = kiwi("run", "format_bytes", "-p", "bytes=1024", "-p", "binary=true", "--json")
    assert done.code == 0, done.err
    output = done.json()["output"]
    assert output["bytes"] == 1024 and isinstance(output["bytes"], int)
    assert output["human"] == "1.0 KiB"
    text = kiwi("run", "hello_world", "-p", "name=1024", "--json")
    assert text.json()["output"] == {"greeting": "Hello, 1024!"}, "a string parameter stays text"


def test_a_version_is_chosen_with_at_or_with_the_option(kiwi: Kiwi) -> None:
    for args in (
        ["hello_world@1.0.0"],
        ["hello_world", "--version", "1.0.0"],
        ["hello_world@1.0.0", "--version", "1.0.0"],
    ):
        done = kiwi("run", *args, "--json")
        assert done.code == 0, (args, done.err)
        assert done.json()["version"] == "1.0.0"
    missing = kiwi("run", "hello_world@9.9.9", "--json")
    assert missing.code == 3 and "9.9.9" in missing.json()["error"]


def test_two_different_versions_are_a_usage_error(kiwi: Kiwi) -> None:
    done = kiwi("run", "hello_world@1.0.0", "--version", "2.0.0")
    assert done.code == 2
    assert "two versions" in done.err and "1.0.0" in done.err and "2.0.0" in done.err


def test_an_empty_version_or_tool_is_a_usage_error(kiwi: Kiwi) -> None:
    """Regression: `hello_world@` asked the registry for version "" and exited 3."""
    for args in (["hello_world@"], ["hello_world", "--version", ""], ["@1.0.0"]):
        done = kiwi("run", *args)
        assert done.code == 2, (args, done.err)
        assert "kiwi: " in done.err


def test_bad_parameters_exit_2_and_name_every_bad_field(kiwi: Kiwi) -> None:
    done = kiwi("run", "format_bytes", "-p", "bytes=lots", "-p", "binary=maybe", "-p", "colour=red")
    assert done.code == 2
    for field in ("bytes:", "binary:", "colour"):
        assert field in done.err, field
    assert "kiwi show format_bytes" in done.err, "the hint says where the parameters are described"


def test_bad_parameters_with_json_still_print_one_result_object(kiwi: Kiwi) -> None:
    """Regression: RunResult.as_json deep-copied the InvalidParameters held in `failure`, which
    cannot be copied, so `kiwi run ... --json` with bad parameters crashed with a traceback."""
    done = kiwi("run", "format_bytes", "-p", "bytes=lots", "--json")
    assert done.code == 2, done.err
    assert "Traceback" not in done.err
    result = done.json()
    assert set(result) == CONTRACT_KEYS
    assert result["status"] == "error" and "bytes:" in result["error"]
    assert result["executor_chain"] == ["format_bytes", "python_runtime", "subprocess"]


def test_an_unknown_tool_exits_3_and_names_it(kiwi: Kiwi) -> None:
    done = kiwi("run", "no_such_tool_for_the_cli")
    assert done.code == 3
    assert "no_such_tool_for_the_cli" in done.err
    as_json = kiwi("run", "no_such_tool_for_the_cli", "--json")
    assert as_json.code == 3 and as_json.json()["status"] == "error"
    assert "no_such_tool_for_the_cli" in as_json.json()["error"]


def test_a_tool_that_exits_non_zero_exits_1(kiwi: Kiwi, publish_tool: Callable[..., str]) -> None:
    tool = publish_tool(
        "cli_fails",
        {"tool_type": "script", "executor": "bash_runtime"},
        {"fail.sh": "echo 'it broke' >&2\nexit 3\n"},
        entrypoint="fail.sh",
    )
    done = kiwi("run", tool, "--json")
    assert done.code == 1
    result = done.json()
    assert result["status"] == "error" and result["exit_code"] == 3
    assert kiwi("run", tool).code == 1


def test_a_tool_that_times_out_exits_124(kiwi: Kiwi, publish_tool: Callable[..., str]) -> None:
    tool = publish_tool(
        "cli_sleeps",
        {"tool_type": "script", "executor": "bash_runtime", "config": {"timeout_s": 1}},
        {"sleep.sh": "sleep 30\n"},
        entrypoint="sleep.sh",
    )
    done = kiwi("run", tool, "--json", timeout=20)
    assert done.code == 124, done.err
    result = done.json()
    assert result["status"] == "timeout"
    assert result["duration_ms"] < 10_000, "the process group was killed at the timeout"


def test_bad_params_json_is_a_usage_error_with_a_hint(kiwi: Kiwi) -> None:
    for bad in ("{name: Ada", "[1, 2]", "null"):
        done = kiwi("run", "hello_world", "--params", bad)
        assert done.code == 2, bad
        assert "--params" in done.err and "hint:" in done.err, bad


def test_usage_errors_with_json_print_one_result_object(kiwi: Kiwi) -> None:
    """Regression: errors found before the run (bad --params, -p without =, two versions) printed
    {"error": {...}} instead of the run contract's object."""
    for args in (["--params", "{bad"], ["-p", "novalue"], ["--version", "2.0.0", "--params", "{}"]):
        ref = "hello_world@1.0.0" if "--version" in args else "hello_world"
        done = kiwi("run", ref, *args, "--json")
        assert done.code == 2, (args, done.err)
        result = done.json()
        assert set(result) == CONTRACT_KEYS, args
        assert result["status"] == "error" and result["tool_id"] == "hello_world" and result["error"]


def test_p_without_a_value_is_a_usage_error(kiwi: Kiwi) -> None:
    done = kiwi("run", "hello_world", "-p", "novalue")
    assert done.code == 2
    assert "KEY=VALUE" in done.err and "novalue" in done.err


def test_an_unreachable_registry_exits_5_without_showing_the_password(kiwi: Kiwi) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://postgres:pw-kiwi-cli-secret@127.0.0.1:{port}/postgres"
    for args in (["run", "hello_world"], ["run", "hello_world", "--json"], ["search", "x"], ["show", "hello_world"]):
        done = kiwi(*args, env={"KIWI_DATABASE_URL": url})
        assert done.code == 5, (args, done.err)
        assert "pw-kiwi-cli-secret" not in done.out + done.err
        assert "Traceback" not in done.err
        assert "cannot connect" in done.out + done.err


def test_a_dry_run_shows_the_chain_and_checks_and_runs_nothing(
    kiwi: Kiwi, publish_tool: Callable[..., str], conn: psycopg.Connection, tmp_path: Path
) -> None:
    # the marker's directory is granted to the tool's sandbox (published by an admin, who may),
    # and writable by the sandbox's user (nobody)
    marks = tmp_path / "marks"
    marks.mkdir()
    marks.chmod(0o777)
    tool = publish_tool(
        "cli_marker",
        {
            "tool_type": "script",
            "executor": "bash_runtime",
            "parameters": [{"name": "marker", "type": "string"}],
            "config": {"sandbox": {"fs": {"write": [str(marks)]}}},
        },
        {"mark.sh": 'touch "$KIWI_PARAM_MARKER"\necho done\n'},
        entrypoint="mark.sh",
    )
    marker = marks / "ran"
    done = kiwi("run", tool, "-p", f"marker={marker}", "--dry-run", "--json")
    assert done.code == 0, done.err
    output = done.json()["output"]
    assert output["executor_chain"] == [tool, "bash_runtime", "subprocess"]
    assert output["validation"]["passed"] is True
    assert output["parameters"] == {"marker": str(marker)}
    people = kiwi("run", tool, "-p", f"marker={marker}", "--dry-run")
    assert people.code == 0 and "dry run ok" in people.err and "bash_runtime" in people.out
    assert not marker.exists(), "a dry run does not run the tool"
    assert runs_of(conn, tool) == 0, "a dry run leaves no run record"
    assert kiwi("run", tool, "-p", f"marker={marker}").code == 0
    assert marker.exists(), "the script does make the marker when it runs"
    assert runs_of(conn, tool) == 1


# --- kiwi search, show ----------------------------------------------------------------------


def test_search_json_is_an_array_of_tools(kiwi: Kiwi) -> None:
    done = kiwi("search", "hello", "--json")
    assert done.code == 0, done.err
    rows = done.json()
    assert isinstance(rows, list)
    assert "hello_world" in [r["tool_id"] for r in rows]


def test_search_takes_a_type_modifier(kiwi: Kiwi) -> None:
    runtimes = kiwi("search", "type:runtime", "bash", "--json").json()
    assert "bash_runtime" in [r["tool_id"] for r in runtimes]
    assert {r["tool_type"] for r in runtimes} == {"runtime"}
    scripts = kiwi("search", "type:script", "hello", "--json").json()
    assert [r["tool_id"] for r in scripts][:1] == ["hello_world"]
    assert {r["tool_type"] for r in scripts} == {"script"}
    option = kiwi("search", "bash", "--type", "runtime", "--json").json()
    assert {r["tool_type"] for r in option} == {"runtime"}


def test_search_for_people_is_a_table(kiwi: Kiwi) -> None:
    done = kiwi("search", "hello")
    assert done.code == 0, done.err
    line = next(line for line in done.out.splitlines() if line.startswith("hello_world "))
    assert "script" in line and "1.0.0" in line and "Greets" in line
    unknown = kiwi("search", "zzqqxxnothingmatchesthis", "--json").json()  # no tool has the words
    assert {r["matched_by"] for r in unknown} <= {"meaning"}  # what is near in meaning, said so
    nothing = kiwi("search", "zzqqxxnothingmatchesthis", env={"KIWI_EMBEDDINGS": "off"})
    assert nothing.code == 0 and "no tools found" in nothing.err


def test_search_shows_a_tool_whose_description_is_blank(kiwi: Kiwi, publish_tool: Callable[..., str]) -> None:
    """Regression: a description of only whitespace made `kiwi search` (and so an empty
    search, which lists everything) fail with an IndexError."""
    tool = publish_tool("cli_blank_desc", {"tool_type": "knowledge", "description": " \n\t"})
    done = kiwi("search", tool)
    assert done.code == 0, done.err
    assert any(line.startswith(f"{tool} ") for line in done.out.splitlines())


def test_limit_must_be_a_positive_number(kiwi: Kiwi) -> None:
    """Regression: --limit -1 and --limit 99999999999 reached the database and exited 1 as if a
    tool had failed ("LIMIT must not be negative", "integer out of range")."""
    for args in (["search", "x"], ["runs"]):
        for bad in ("-1", "0", "99999999999", "many"):
            done = kiwi(*args, "--limit", bad)
            assert done.code == 2, (args, bad, done.err)
            assert "--limit" in done.err
    assert kiwi("search", "hello", "--limit", "1", "--json").json().__len__() == 1
    # search serves at most 200 a page: more is refused rather than silently cut
    over = kiwi("search", "hello", "--limit", "201")
    assert over.code == 2 and "must be from 1 to 200, got 201" in over.err


def test_show_for_people_lists_the_chain_parameters_and_files(kiwi: Kiwi, conn: psycopg.Connection) -> None:
    done = kiwi("show", "hello_world")
    assert done.code == 0, done.err
    out = done.out
    assert out.startswith("hello_world@1.0.0  (script)")
    chain = out.split("chain:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [line.split()[:3] for line in chain] == [
        ["0", "hello_world", "script"],
        ["1", "bash_runtime", "runtime"],
        ["2", "subprocess", "primitive"],
    ]
    assert "parameters:" in out and "name" in out and 'default "world"' in out
    sha = conn.execute(
        "select f.sha256 from tool_version_files f join tool_versions v on v.id = f.version_id"
        " join tools t on t.id = v.tool_uuid where t.ref = 'hello_world' and v.is_latest and f.path = 'hello.sh'"
    ).fetchone()[0]
    files = out.split("files:\n", 1)[1]
    assert "*hello.sh" in files and f"sha256 {sha[:16]}" in files


def test_show_json_has_the_manifest_chain_parameters_and_files(kiwi: Kiwi) -> None:
    done = kiwi("show", "hello_world", "--json")
    assert done.code == 0, done.err
    shown = done.json()
    assert set(shown) == {
        "tool_id",
        "version",
        "tool_type",
        "content_hash",
        "manifest",
        "chain",
        "parameters",
        "files",
        "deprecated",
        "deprecation_message",
        "yanked",
        "yanked_reason",
        "sandbox",
    }
    assert [row["tool_id"] for row in shown["chain"]] == ["hello_world", "bash_runtime", "subprocess"]
    # the profile its processes run under: hello_world reaches no network and no host path
    assert shown["sandbox"]["network"] == "none" and shown["sandbox"]["fs"] == {"read": [], "write": []}
    assert shown["parameters"]["properties"]["name"]["type"] == "string"
    assert shown["files"][0]["path"] == "hello.sh" and len(shown["files"][0]["sha256"]) == 64
    assert kiwi("show", "no_such_tool_for_the_cli").code == 3


# --- kiwi publish ---------------------------------------------------------------------------


def test_publish_a_directory_then_run_it_and_refuse_a_changed_same_version(
    kiwi: Kiwi, tmp_path: Path, conn: psycopg.Connection, delete_later: list[str]
) -> None:
    tool_id = unique("cli_published")
    directory = tool_dir(tmp_path, tool_id)
    delete_later.append(tool_id)

    # the local owner publishes into its own namespace; `public` is an admin's choice
    not_mine = kiwi("publish", str(directory))
    assert not_mine.code == 4 and 'cannot publish into namespace "public"' in not_mine.err
    assert "kiwi --admin publish" in not_mine.err and versions_of(conn, tool_id) == []
    first = kiwi("--admin", "publish", str(directory))
    assert first.code == 0, first.err
    assert first.out.startswith(f"published: {tool_id}@1.0.0")
    assert f"chain: {tool_id} -> bash_runtime -> subprocess" in first.out
    again = kiwi("publish", str(directory), env={"KIWI_ADMIN": "1"})
    assert again.code == 0 and again.out.startswith(f"unchanged: {tool_id}@1.0.0")
    as_json = kiwi("--admin", "publish", str(directory), "--json").json()
    assert as_json["tool_id"] == tool_id and as_json["unchanged"] is True
    before = versions_of(conn, tool_id)
    assert len(before) == 1

    ran = kiwi("run", tool_id, "-p", "word=kiwi", "--json")
    assert ran.code == 0, ran.err
    assert ran.json()["output"] == {"said": "kiwi"}

    (directory / "say.sh").write_text(SAY + "# changed without a new version\n")
    refused = kiwi("--admin", "publish", str(directory))
    assert refused.code == 4, refused.err
    assert "already published" in refused.err and "hint:" in refused.err
    assert versions_of(conn, tool_id) == before, "a refused publish changes nothing"
    assert kiwi("run", tool_id, "-p", "word=still", "--json").json()["output"] == {"said": "still"}


def test_publish_a_directory_without_tool_yaml_is_a_usage_error(kiwi: Kiwi, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = kiwi("publish", str(tmp_path / "empty"))
    assert done.code == 2
    assert "tool.yaml" in done.err
    assert kiwi("publish", str(tmp_path / "not-there")).code == 2


def test_publish_names_the_bad_field(kiwi: Kiwi, tmp_path: Path, conn: psycopg.Connection) -> None:
    tool_id = unique("cli_bad_field")
    directory = tool_dir(tmp_path, tool_id, visibility="everyone")
    done = kiwi("publish", str(directory))
    assert done.code == 2, done.err
    assert "visibility" in done.err and "everyone" in done.err
    (directory / "tool.yaml").write_text(f"tool_id: {tool_id}\ntool_type: knowledge\nversion: 1.0\n")
    float_version = kiwi("publish", str(directory))
    assert float_version.code == 2 and "version" in float_version.err
    assert versions_of(conn, tool_id) == []


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("latin1", "tool_id: x\nname: caf\xe9\n".encode("latin-1"), "UTF-8"),
        ("nul escape", b'tool_id: x\ntool_type: knowledge\nversion: 1.0.0\nname: "a\\0b"\n', "name: holds a NUL"),
        ("nan", b"tool_id: x\ntool_type: knowledge\nversion: 1.0.0\nconfig: {ratio: .nan}\n", "config.ratio"),
        ("infinity", b"tool_id: x\ntool_type: knowledge\nversion: 1.0.0\nconfig: {big: 1.0e+999}\n", "config.big"),
        ("date", b"tool_id: x\ntool_type: knowledge\nversion: 2024-01-01\n", "version: a YAML date"),
        ("date key", b"tool_id: x\nconfig: {2024-01-01: x}\n", "not text"),
        ("recursive alias", b"tool_id: x\nconfig: &c {self: *c}\n", "contains itself"),
        ("deep", b"tool_id: x\nconfig: " + b"[" * 3000 + b"]" * 3000 + b"\n", "nests deeper than 64 levels"),
    ],
)
def test_a_tool_yaml_json_cannot_carry_is_a_usage_error(
    name: str, content: bytes, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: these escaped `kiwi publish` as tracebacks (UnicodeDecodeError, RecursionError,
    TypeError, "Circular reference") or reached the database as exit 1 ("registry error 22P05"/
    "22P02") or, for a YAML date, as a stringified value; now each is named before publishing.
    (tool_id "x y" is invalid, so nothing is published even if the check were missing.)"""
    (tmp_path / "tool.yaml").write_bytes(content.replace(b"tool_id: x\n", b"tool_id: x y\n"))
    assert main(["publish", str(tmp_path)]) == 2, name
    assert says in capsys.readouterr().err


def test_a_file_holding_nul_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: a NUL in a file's text reached the database ("unsupported Unicode escape
    sequence") and exited 1; it is not a text file, so it is refused before publishing."""
    (tmp_path / "tool.yaml").write_text("tool_id: x y\ntool_type: knowledge\nversion: 1.0.0\n")
    (tmp_path / "data.txt").write_text("a\0b")
    assert main(["publish", str(tmp_path)]) == 2
    assert "data.txt: holds NUL" in capsys.readouterr().err


# --- kiwi runs, help ------------------------------------------------------------------------


def test_runs_lists_the_runs_just_made(kiwi: Kiwi, publish_tool: Callable[..., str]) -> None:
    tool = publish_tool(
        "cli_runs",
        {"tool_type": "script", "executor": "bash_runtime", "parameters": [{"name": "word", "type": "string"}]},
        {"ok.sh": "echo ok\n"},
        entrypoint="ok.sh",
    )
    assert kiwi("run", tool).code == 0
    assert kiwi("run", tool, "--params", '{"word": 1}').code == 2
    done = kiwi("runs", "--tool", tool, "--json")
    assert done.code == 0, done.err
    rows = done.json()
    assert [r["status"] for r in rows] == ["error", "success"], "newest first"
    assert {r["tool_id"] for r in rows} == {tool}
    assert rows[1]["executor_chain"] == [tool, "bash_runtime", "subprocess"]
    assert len(kiwi("runs", "--tool", tool, "--limit", "1", "--json").json()) == 1
    people = kiwi("runs", "--tool", tool)
    lines = people.out.splitlines()
    assert len(lines) == 2 and f"{tool}@1.0.0" in lines[0]
    assert "error" in lines[0] and "invalid parameters" in lines[0] and "success" in lines[1]
    # regression: only the error's first line was shown ("invalid parameters for x:"), and
    # the duration column moved with the length of each tool's name
    assert "word: must be of type string" in lines[0]
    assert lines[0].index(" ms") == lines[1].index(" ms"), "columns line up"
    assert "no runs yet" in kiwi("runs", "--tool", unique("cli_never_ran")).err


_EXIT_PROBE = """
import atexit, sys
from runner.cli.main import entrypoint
atexit.register(lambda: print("exit handler ran", file=sys.stderr))
print("x" * 200_000)  # more than a pipe holds: it must be flushed before the fast exit
sys.argv = ["kiwi", *sys.argv[1:]]
entrypoint()
"""


def test_the_kiwi_command_exits_fast_yet_runs_exit_handlers_and_flushes_output(
    database_url: str, cache_dir: Path, tmp_path: Path
) -> None:
    """entrypoint() skips the interpreter's teardown (os._exit), so everything a normal exit
    does that matters must still happen: exit handlers, buffered output, the exit code."""
    argv = [sys.executable, "-c", _EXIT_PROBE, "run", "no_such_tool_for_the_exit_probe", "--json"]
    done = subprocess.run(argv, cwd=tmp_path, env=kiwi_env(database_url, cache_dir), capture_output=True, text=True)
    assert done.returncode == 3, done.stderr
    first, result = done.stdout.splitlines()
    assert first == "x" * 200_000
    assert json.loads(result)["status"] == "error"
    assert "exit handler ran" in done.stderr


_THREAD_PROBE = """
import sys, threading, time
from pathlib import Path
from runner.cli.main import entrypoint
marker = Path(sys.argv[1])
threading.Thread(target=lambda: (time.sleep(0.5), marker.write_text("done"))).start()
sys.argv = ["kiwi", "run", "no_such_tool_for_the_thread_probe"]
entrypoint()
"""


def test_a_thread_still_running_keeps_the_ordinary_exit_that_waits_for_it(
    database_url: str, cache_dir: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "thread-finished"
    argv = [sys.executable, "-c", _THREAD_PROBE, str(marker)]
    done = subprocess.run(argv, cwd=tmp_path, env=kiwi_env(database_url, cache_dir), capture_output=True, text=True)
    assert done.returncode == 3, done.stderr
    assert marker.read_text() == "done", "the process ended before its thread did"


def test_a_closed_stdout_ends_quietly_with_141_after_the_exit_handlers(
    database_url: str, cache_dir: Path, tmp_path: Path
) -> None:
    """Regression: when the reader went away, kiwi printed a BrokenPipeError traceback. Now
    the exit handlers run and nothing is reported; the command's own status stays (3: the
    tool was not found), and a command that succeeded would end with 141 (128 + SIGPIPE)."""
    probe = _EXIT_PROBE.replace('print("x" * 200_000)', 'sys.stdout.write("x")')  # still buffered at the end
    argv = [sys.executable, "-c", probe, "run", "no_such_tool_for_the_pipe_probe"]
    env = {k: v for k, v in kiwi_env(database_url, cache_dir).items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.Popen(
        argv,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    proc.stdout.close()  # long before the command writes its result
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert "exit handler ran" in err and "BrokenPipeError" not in err and "Traceback" not in err


def test_a_reader_that_goes_away_mid_output_gets_no_traceback(kiwi: Kiwi, database_url: str, cache_dir: Path) -> None:
    """`kiwi search | head -0`: the write itself fails; kiwi stops quietly with 141."""
    argv = [sys.executable, "-m", "runner.cli", "search", "", "--limit", "200"]
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=kiwi_env(database_url, cache_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err


def test_help_mentions_every_command_and_every_run_option(kiwi: Kiwi) -> None:
    top = kiwi("--help")
    assert top.code == 0
    for command in ("run", "search", "show", "publish", "runs"):
        assert command in top.out
    assert "124" in top.out, "the exit codes are documented"
    run_help = kiwi("run", "--help")
    assert run_help.code == 0
    for option in ("TOOL", "-p", "KEY=VALUE", "--params", "--version", "--dry-run", "--json"):
        assert option in run_help.out, option


@pytest.mark.slow
def test_the_cli_loads_no_heavy_library_it_does_not_use() -> None:
    """Regression: wiring `kiwi mcp` imported the MCP SDK at start-up (~0.7 s on every kiwi run).
    Building the parser must load none of the MCP SDK, the HTTP stack or supabase-py, nor
    jsonschema (only refused parameters are described with it: runner/core/params.py)."""
    probe = (
        "import sys, runner.cli.main, runner.harness.run; runner.cli.main.build_parser(); "
        "heavy = ('mcp', 'anyio', 'httpx', 'aiohttp', 'pydantic', 'supabase', 'postgrest', 'yaml', 'jsonschema'); "
        "print(sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in heavy}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
