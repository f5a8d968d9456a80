"""Config contracts (supabase/schemas/150_config_contracts.sql): a tool's config
is held to the config_schema of every element of its chain.

Hypothesis draws configs whose keys come from the union of every seeded contract (the
canonical keys, their old spellings, the keys other chains declare) and from nowhere at all,
with values each key's schema allows, and publishes each through PostgresRegistry into
namespace `local` as an admin: an admin's config may widen the sandbox and read any
variable of the runner's environment (a drawn `sandbox` or `env_passthrough` would
otherwise be refused for that, 430_publish_trust.sql, which is not what this
test is about). Every publish either succeeds with the config stored canonically, or is
refused naming exactly the keys its chain does not declare.
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from runner import PostgresRegistry, UsageError
from runner import admin as admin_principal
from tests.kiwi_cli import kiwi_env, run_kiwi

# The chains drawn: (tool_type, executor, files). Each is one the local owner may publish on.
CHAINS = [
    ("script", "bash_runtime", [{"path": "main.sh", "content_text": "echo ok\n"}]),
    ("script", "python_runtime", [{"path": "main.py", "content_text": "print(1)\n"}]),
    ("script", "node_runtime", [{"path": "main.js", "content_text": "1\n"}]),
    ("api", "http_client", []),
    ("thread", "llm_runtime", []),
]
STEM = "contract_fuzz"


def deep_merge(base: Any, patch: Any) -> Any:
    """kiwi_internal.jsonb_deep_merge: objects merge key by key, the patch wins."""
    if patch is None:
        return base
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return patch
    return {**base, **{k: deep_merge(base.get(k), v) for k, v in patch.items()}}


def chain_contract(conn: psycopg.Connection, tool_type: str, executor: str) -> dict[str, Any]:
    """The contract of a tool of tool_type on executor: its chain's schemas merged from the primitive up."""
    rules = dict(conn.execute("select tool_type, config_schema from tool_type_rules").fetchall())
    links = conn.execute(
        "select tool_type, manifest -> 'config_schema' from resolve_executor_chain(%s) order by depth desc",
        (executor,),
    ).fetchall()
    contract: Any = None
    for link_type, schema in [*links, (tool_type, None)]:
        contract = deep_merge(deep_merge(contract, rules.get(link_type)), schema)
    return contract


def every_seeded_key(conn: psycopg.Connection) -> set[str]:
    """The top-level keys and old spellings every seeded contract declares, tool types' included."""
    schemas = [r[0] for r in conn.execute("select config_schema from tool_type_rules where config_schema is not null")]
    schemas += [
        r[0]
        for r in conn.execute(
            "select v.manifest -> 'config_schema' from tool_versions v"
            " where v.is_latest and v.manifest ? 'config_schema'"
        )
    ]
    return {k for s in schemas for part in ("properties", "x-aliases") for k in (s.get(part) or {})}


# --- values a schema allows --------------------------------------------------------------------

texts = st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=8)
plain_json = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | texts,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(texts, inner, max_size=2),
    max_leaves=4,
)
names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
random_keys = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00;"), min_size=1, max_size=8
)


def numbers(schema: dict[str, Any], whole: bool) -> st.SearchStrategy[Any]:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum")
    if whole:
        first = -1000 if low is None else int(low) + (1 if "exclusiveMinimum" in schema else 0)
        return st.integers(min_value=first, max_value=1000 if high is None else high)
    return st.floats(
        min_value=low if low is not None else -1000.0,
        max_value=high if high is not None else 1000.0,
        exclude_min="exclusiveMinimum" in schema,
        allow_nan=False,
        allow_infinity=False,
    )


def values(schema: Any) -> st.SearchStrategy[Any]:
    """Values `schema` allows (the subset of JSON Schema contracts use)."""
    if not isinstance(schema, dict):
        return plain_json
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if not kinds:
        return plain_json
    strategies = []
    for kind in kinds:
        if kind == "object":
            strategies.append(objects(schema))
        elif kind == "array":
            strategies.append(st.lists(values(schema.get("items")), max_size=2))
        elif kind == "string":
            strategies.append(texts)
        elif kind in ("number", "integer"):
            strategies.append(numbers(schema, kind == "integer"))
        elif kind == "boolean":
            strategies.append(st.booleans())
        else:
            strategies.append(st.none())
    return st.one_of(strategies)


def at_path(schema: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        extra = schema.get("additionalProperties")
        schema = (schema.get("properties") or {}).get(part) or (extra if isinstance(extra, dict) else {})
    return schema


@st.composite
def old_spelling(draw: st.DrawFn, spec: Any, schema: dict[str, Any]) -> tuple[Any, set[str]]:
    """A value written in an alias's old spelling (its x-aliases spec, in the object `schema`
    describes), and the keys of that object it becomes."""
    if isinstance(spec, str):
        spec = {"to": spec}
    if "to" in spec:
        target = at_path(schema, spec["to"])
        value = draw(values(target.get("items") if spec.get("wrap") else target))
        if "add" in spec:
            value -= spec["add"]
        return value, {spec["to"].split(".")[0]}
    if "values" in spec:
        choice = draw(st.sampled_from(sorted(spec["values"])))
        return choice, set(spec["values"][choice])
    if "append" in spec:
        item_schema = at_path(schema, spec["append"]).get("items") or {}

        def one() -> dict[str, Any]:
            return {k: draw(old_spelling(sub, item_schema))[0] for k, sub in sorted(spec.get("spread", {}).items())}

        return ([one() for _ in range(draw(st.integers(0, 2)))] if spec.get("each") else one()), set()
    chosen = draw(st.lists(st.sampled_from(sorted(spec["spread"])), unique=True, max_size=len(spec["spread"])))
    written: dict[str, Any] = {}
    became: set[str] = set()
    for key in chosen:
        written[key], targets = draw(old_spelling(spec["spread"][key], schema))
        became |= targets
    return written, became


@st.composite
def objects(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    """An object `schema` allows: some of its keys (the required ones always), some old
    spellings that do not clash with a key given, entries of its additionalProperties."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    out = {k: draw(values(s)) for k, s in sorted(props.items()) if k in required or draw(st.booleans())}
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key in draw(st.lists(names, max_size=2, unique=True)):
            if key not in props and key not in (schema.get("x-aliases") or {}):
                out[key] = draw(values(extra))
    for alias, spec in sorted((schema.get("x-aliases") or {}).items()):
        if alias in props or not draw(st.booleans()):
            continue
        value, became = draw(old_spelling(spec, schema))
        if not became & set(out):
            out[alias] = value
    return out


# --- what a canonical config is ----------------------------------------------------------------


def old_keys_left(value: Any, schema: Any, path: str = "config") -> list[str]:
    """The paths of old spellings still in `value` (none, once publish made it canonical)."""
    if not isinstance(schema, dict):
        return []
    found: list[str] = []
    if isinstance(value, dict):
        aliases = schema.get("x-aliases") or {}
        props = schema.get("properties") or {}
        for key, item in value.items():
            if key in aliases and key not in props:
                found.append(f"{path}.{key}")
            child = props.get(key, schema.get("additionalProperties"))
            found += old_keys_left(item, child, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value, 1):
            found += old_keys_left(item, schema.get("items"), f"{path}[{i}]")
    return found


def has_old_spelling(value: Any, schema: Any) -> bool:
    return bool(old_keys_left(value, schema))


# --- the property ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def contracts(database_url: str) -> dict[tuple[str, str], dict[str, Any]]:
    with psycopg.connect(database_url) as conn:
        return {(t, e): chain_contract(conn, t, e) for t, e, _ in CHAINS}


@pytest.fixture(scope="module")
def seeded_keys(database_url: str) -> list[str]:
    with psycopg.connect(database_url) as conn:
        return sorted(every_seeded_key(conn))


@pytest.fixture(scope="module")
def admin(database_url: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection


@pytest.fixture(scope="module")
def registry(database_url: str, loop: asyncio.AbstractEventLoop) -> Iterator[PostgresRegistry]:
    r = PostgresRegistry(database_url, principal=admin_principal())
    yield r
    loop.run_until_complete(r.aclose())


def test_the_seeded_contracts_declare_the_design_documents_keys(
    contracts: dict[tuple[str, str], dict[str, Any]], seeded_keys: list[str]
) -> None:
    script = contracts[("script", "python_runtime")]["properties"]
    api = contracts[("api", "http_client")]["properties"]
    assert {"timeout", "entrypoint", "validation", "requires", "command", "args", "env"} <= set(script)
    assert {"timeout", "retries", "retry_delay", "retryable_statuses", "url", "auth"} <= set(api)
    assert script["validation"]["properties"]["rules"]["items"]["properties"]["type"]["enum"] == [
        "syntax_check",
        "pattern_check",
        "shebang_required",
    ]
    assert {"timeout_s", "retry", "transport", "tool", "providers", "requires"} <= set(seeded_keys)
    assert "requires" not in contracts[("script", "bash_runtime")]["properties"], "bash installs nothing"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), chain=st.sampled_from(CHAINS))
def test_a_config_is_published_canonically_or_refused_naming_each_unknown_key(
    data: st.DataObject,
    chain: tuple[str, str, list[dict[str, str]]],
    contracts: dict[tuple[str, str], dict[str, Any]],
    seeded_keys: list[str],
    registry: PostgresRegistry,
    loop: asyncio.AbstractEventLoop,
    admin: psycopg.Connection,
) -> None:
    tool_type, executor, files = chain
    contract = contracts[(tool_type, executor)]
    declared = set(contract.get("properties") or {}) | set(contract.get("x-aliases") or {})
    config = data.draw(objects(contract), label="keys this chain declares")
    if "entrypoint" in config:  # names one of the tool's files: publish checks it (tests/test_run.py)
        if files:
            config["entrypoint"] = data.draw(st.sampled_from([f["path"] for f in files]))
        else:
            del config["entrypoint"]
    strangers = data.draw(
        st.lists(st.sampled_from(seeded_keys) | random_keys, max_size=3, unique=True).map(
            lambda ks: [k for k in ks if k not in declared]
        ),
        label="keys it does not",
    )
    for key in strangers:
        config[key] = data.draw(plain_json)
    given_config = copy.deepcopy(config)
    tool_id = f"{STEM}_{uuid.uuid4().hex[:10]}"
    manifest = {"tool_id": f"local/{tool_id}", "tool_type": tool_type, "executor": executor, "version": "1.0.0"}
    manifest["config"] = config
    try:
        answer = loop.run_until_complete(registry.publish(manifest, files))
    except UsageError as e:
        problems = getattr(e, "problems", [])
        assert strangers, f"a config of declared keys and allowed values was refused: {problems}"
        for key in strangers:
            assert any(p.startswith(f"config.{key}: unknown key") for p in problems), (key, problems)
        assert len(problems) == len(strangers), f"only the unknown keys are refused: {problems}"
        event(f"refused {len(strangers)} unknown key(s)")
        return
    try:
        assert not strangers, f"unknown keys {strangers} were published"
        stored = admin.execute(
            "select v.manifest -> 'config' from tool_versions v join tools t on t.id = v.tool_uuid"
            " where t.namespace = 'local' and t.tool_id = %s",
            (tool_id,),
        ).fetchone()[0]
        assert not old_keys_left(stored, contract), stored
        said = answer.get("normalised") or []
        aliases = contract.get("x-aliases") or {}
        for key, value in given_config.items():
            if key in aliases:
                assert any(line.startswith(f"config.{key} -> ") for line in said), (key, said)
                target = aliases[key]
                if isinstance(target, str):
                    assert stored[target] == value, (key, target, stored)
                elif key == "retry" and "attempts" in value:
                    assert stored["retries"] == value["attempts"] - 1
            elif not has_old_spelling(value, (contract.get("properties") or {}).get(key)):
                assert stored[key] == value, (key, stored)
        event("published " + ("with old spellings" if said else "as written"))
    finally:
        admin.execute("delete from tools where namespace = 'local' and tool_id = %s", (tool_id,))


def test_kiwi_publish_says_which_old_spellings_it_rewrote(
    database_url: str, tmp_path: Path, conn: psycopg.Connection
) -> None:
    tool_id = f"{STEM}_{uuid.uuid4().hex[:10]}"
    directory = tmp_path / tool_id
    directory.mkdir()
    (directory / "tool.yaml").write_text(
        f"tool_id: local/{tool_id}\ntool_type: script\nexecutor: bash_runtime\nversion: 1.0.0\n"
        "entrypoint: main.sh\nconfig:\n  timeout_s: 5\n"
    )
    (directory / "main.sh").write_text("echo ok\n")
    try:
        done = run_kiwi(["publish", str(directory)], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache"))
        assert done.code == 0, done.err
        assert "normalised: config.timeout_s -> config.timeout" in done.out
        typo = directory / "tool.yaml"
        typo.write_text(typo.read_text().replace("timeout_s: 5", "timeuot: 5").replace("1.0.0", "1.0.1"))
        done = run_kiwi(["publish", str(directory)], cwd=tmp_path, env=kiwi_env(database_url, tmp_path / "cache"))
        assert done.code == 2, (done.out, done.err)
        assert "config.timeuot: unknown key (did you mean timeout?)" in done.err
    finally:
        conn.execute("delete from tools where namespace = 'local' and tool_id = %s", (tool_id,))
