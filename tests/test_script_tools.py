"""The local conveniences of a project's `.ai/`, through `kiwi` as a process.

* A bare `.py` or `.sh` file in `.ai/tools` runs with no tool.yaml: its name is its tool_id,
  `__version__` its version, its docstring (or leading comment) its description, its shebang
  its runtime.
* A Python tool that writes no `requires` gets them from its imports; `kiwi publish` shows
  them and publishes them locked by uv.
* `from lib import x` finds the user space's shared `lib/`, which a publish carries along.
* An output larger than the limit is written to `.ai/outputs/tools/<tool>/`, the newest N
  kept, and the result points at the file.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from tests.kiwi_cli import Done, kiwi_env, run_kiwi

pytestmark = pytest.mark.slow

SHOUT = '''#!/usr/bin/env python3
"""Says a text back in capitals, and a size for people."""
import json
import sys

import humanize
from lib import words

__version__ = "1.2.0"
__namespace__ = "local"
__category__ = "examples"

params = json.load(sys.stdin)
print(json.dumps({"text": words.shout(params["text"]), "size": humanize.naturalsize(1000)}))
'''

GREET = """#!/bin/bash
# Greets whoever asks.
# Parameters arrive as KIWI_PARAM_<NAME>.
__version__=0.3.0
printf '{"hello": "%s"}\\n' "${KIWI_PARAM_NAME:-world}"
"""

BIG = '''"""Counts to n."""
import json
import sys

print(json.dumps({"items": list(range(int(json.load(sys.stdin)["n"])))}))
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".ai" / "tools" / "text").mkdir(parents=True)
    (tmp_path / "home" / "lib").mkdir(parents=True)
    (tmp_path / "home" / "lib" / "words.py").write_text("def shout(text):\n    return text.upper() + '!'\n")
    return root


@pytest.fixture
def kiwi(database_url: str, tmp_path: Path, project: Path) -> Callable[..., Done]:
    def run(*args: str, **extra: str) -> Done:
        env = kiwi_env(database_url, tmp_path / "cache", KIWI_USER_SPACE=str(tmp_path / "home"), **extra)
        return run_kiwi(args, cwd=project, env=env, timeout=180)

    return run


@pytest.fixture
def cleanup(conn: psycopg.Connection) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for ref in made:
        conn.execute("delete from tools where ref = %s", (ref,))


def test_bare_scripts_run_with_a_manifest_read_from_the_file(kiwi: Callable[..., Done], project: Path) -> None:
    tools = project / ".ai" / "tools"
    (tools / "greet_someone.sh").write_text(GREET)
    (tools / "text" / "count_to.py").write_text(BIG)

    greeted = kiwi("run", "greet_someone", "-p", "name=kiwi", "--json")
    assert greeted.code == 0, greeted
    answer = greeted.json()
    assert answer["output"] == {"hello": "kiwi"}
    assert (answer["version"], answer["executor_chain"]) == ("0.3.0", ["greet_someone", "bash_runtime", "subprocess"])

    counted = kiwi("run", "count_to", "-p", "n=3", "--json")
    assert counted.code == 0, counted
    assert counted.json()["output"] == {"items": [0, 1, 2]}
    assert counted.json()["version"] == "0.0.0", "no __version__: 0.0.0"
    assert counted.json()["executor_chain"][1] == "python_runtime", "a .py without a shebang runs on Python"

    dry = kiwi("run", "greet_someone", "--dry-run", "--json")
    assert dry.code == 0, dry

    found = kiwi("search", "local: greets whoever", "--json", KIWI_EMBEDDINGS="off")
    assert found.code == 0, found
    assert "greet_someone" in found.out and "local:project" in found.out, found.out

    (tools / "odd.sh").write_text("#!/usr/bin/env ruby\nputs 1\n")
    odd = kiwi("run", "odd")
    assert odd.code == 2 and "its shebang names 'ruby'" in odd.err, odd


def test_a_python_script_gets_its_requires_from_its_imports_and_the_shared_lib(
    kiwi: Callable[..., Done], project: Path, conn: psycopg.Connection, cleanup: list[str]
) -> None:
    name = f"shout_{uuid.uuid4().hex[:6]}"
    cleanup.append(f"local/{name}")
    (project / ".ai" / "tools" / f"{name}.py").write_text(SHOUT)

    ran = kiwi("run", f"local/{name}", "-p", "text=hi", "--json")
    assert ran.code == 0, ran
    assert ran.json()["output"] == {"text": "HI!", "size": "1.0 kB"}
    assert ran.json()["version"] == "1.2.0"

    published = kiwi("publish", f"local/{name}")
    assert published.code == 0, published
    assert "requires (found in its imports: humanize; locked with uv): humanize==" in published.out, published.out
    assert "with the shared lib: lib/words.py" in published.out
    row = conn.execute(
        "select v.manifest, v.manifest_yaml, array_agg(f.path order by f.path) from tool_versions v"
        " join tools t on t.id = v.tool_uuid join tool_version_files f on f.version_id = v.id"
        " where t.ref = %s group by v.id",
        (f"local/{name}",),
    ).fetchone()
    assert row is not None
    manifest, manifest_yaml, paths = row
    assert manifest["version"] == "1.2.0" and manifest["category"] == "examples"
    assert manifest["description"] == "Says a text back in capitals, and a size for people."
    (pin,) = manifest["config"]["requires"]
    assert pin.startswith("humanize==") and len(pin) > len("humanize=="), manifest
    assert manifest_yaml is None, "no tool.yaml was written: nothing to keep as written"
    assert paths == ["lib/words.py", f"{name}.py"]

    from_registry = kiwi("run", f"local/{name}", "-p", "text=again", "--registry", "--json")
    assert from_registry.code == 0, from_registry
    assert from_registry.json()["output"]["text"] == "AGAIN!", "the published version carries its lib"

    over = kiwi("pull", f"local/{name}")
    assert over.code == 4 and "as a bare script" in over.err, over
    assert (project / ".ai" / "tools" / f"{name}.py").read_text() == SHOUT, "the script is left as it was"


def test_a_large_output_is_written_to_the_projects_outputs_and_the_result_points_at_it(
    kiwi: Callable[..., Done], project: Path
) -> None:
    (project / ".ai" / "tools" / "count_to.py").write_text(BIG)
    limits = {"KIWI_LARGE_OUTPUT_BYTES": "1000", "KIWI_KEEP_OUTPUTS": "2"}

    small = kiwi("run", "count_to", "-p", "n=3", "--json", **limits)
    assert small.json()["output"] == {"items": [0, 1, 2]}, "a small output stays in the result"

    pointed = []
    for n in (500, 501, 502):
        done = kiwi("run", "count_to", "-p", f"n={n}", "--json", **limits)
        assert done.code == 0, done
        output = done.json()["output"]
        assert set(output) == {"output_file", "bytes", "preview"}
        assert f"the output ({output['bytes']} bytes) was written to {output['output_file']}" in done.err
        kept = json.loads(Path(output["output_file"]).read_text())
        assert kept == {"items": list(range(n))}
        assert output["preview"] == Path(output["output_file"]).read_text()[:2000]
        pointed.append(Path(output["output_file"]))

    folder = project / ".ai" / "outputs" / "tools" / "count_to"
    assert sorted(folder.iterdir()) == pointed[1:], "the newest two are kept"
