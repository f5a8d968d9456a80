"""${VAR} expansion and {placeholder} argv templating (runner/core/expand.py)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner import ConfigError
from runner.core.expand import expand_vars, expand_vars_deep, fill, fill_deep, render_argv, variables_in

ENV = {"TOKEN": "s3cret", "EMPTY": ""}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Bearer ${TOKEN}", "Bearer s3cret"),
        ("${MISSING:-fallback}", "fallback"),
        ("${EMPTY:-fallback}", "fallback"),
        ("${TOKEN:-fallback}", "s3cret"),
        ("${TOKEN:+present}", "present"),
        ("${MISSING:+present}", ""),
        ("${EMPTY}", ""),
        ("no variables, {braces} and $HOME stay", "no variables, {braces} and $HOME stay"),
    ],
)
def test_variable_forms_follow_the_shell(text: str, expected: str) -> None:
    assert expand_vars(text, ENV) == expected


def test_an_unset_variable_without_default_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="GITHUB_TOKEN is not set") as info:
        expand_vars("token ${GITHUB_TOKEN}", ENV)
    assert "${GITHUB_TOKEN:-" in (info.value.hint or "")


def test_nested_configs_expand_values_not_keys() -> None:
    config = {"headers": {"${TOKEN}": "x ${TOKEN}"}, "args": ["${TOKEN}", 3]}
    assert expand_vars_deep(config, ENV) == {"headers": {"${TOKEN}": "x s3cret"}, "args": ["s3cret", 3]}
    assert variables_in(config) == {"TOKEN"}


def test_a_placeholder_is_one_argv_item_whatever_it_holds() -> None:
    hostile = "a b; rm -rf / $(reboot) `id` 'q' \"d\""
    argv = render_argv(["--name", "{name}", "{entrypoint}"], {"name": hostile, "entrypoint": "/x/run.sh"})
    assert argv == ["--name", hostile, "/x/run.sh"]


def test_spread_placeholders_become_several_items_or_none() -> None:
    assert render_argv(["install", "{requires...}"], {"requires": ["a==1", "b"]}) == ["install", "a==1", "b"]
    assert render_argv(["install", "{requires...}"], {"requires": []}) == ["install"]


def test_values_that_are_not_text_read_as_json() -> None:
    assert render_argv(["{n}", "{flag}", "{obj}"], {"n": 3, "flag": True, "obj": {"a": 1}}) == [
        "3",
        "true",
        '{"a":1}',
    ]


def test_an_unknown_placeholder_in_argv_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"\{nope\} has no value"):
        render_argv(["{nope}"], {"name": "x"})


def test_templates_inside_text_and_bodies() -> None:
    assert fill("{env_dir}/bin/python", {"env_dir": "/e"}) == "/e/bin/python"
    assert fill('{"literal": {unknown}}', {}, strict=False) == '{"literal": {unknown}}'
    body = fill_deep({"count": "{n}", "text": "n={n}", "keep": "{other}"}, {"n": 5})
    assert body == {"count": 5, "text": "n=5", "keep": "{other}"}


@given(st.text(), st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True), st.text()))
def test_expansion_never_fails_unexpectedly(text: str, env: dict[str, str]) -> None:
    with contextlib.suppress(ConfigError):
        assert isinstance(expand_vars(text, env), str)


def test_a_template_resolves_its_variables_and_placeholders_in_one_pass() -> None:
    """What is filled in is never looked at again: a value holding ${VAR} stays that text,
    and a secret holding {name} is not read as a placeholder."""
    env = {"TOKEN": "s3cret{name}"}
    values = {"name": "${TOKEN}", "path": "/x/${TOKEN}.sh"}
    assert fill("--t=${TOKEN} --n={name}", values, environ=env) == "--t=s3cret{name} --n=${TOKEN}"
    assert render_argv(["${TOKEN}", "{name}", "{path}"], values, env) == ["s3cret{name}", "${TOKEN}", "/x/${TOKEN}.sh"]


def test_a_template_without_an_environment_keeps_its_variables_as_written() -> None:
    """For a cache key: ${VAR}s are not placeholders (no "placeholder {VAR} has no value")."""
    assert fill("${A:-d} {x} ${B:+y} ${C}", {"x": 1}) == "${A:-d} 1 ${B:+y} ${C}"
    assert render_argv(["${A}", "{x...}"], {"x": ["a", "b"]}) == ["${A}", "a", "b"]


def test_an_unset_variable_named_only_by_a_value_is_never_an_error() -> None:
    assert fill("{p}", {"p": "${NOT_SET_ANYWHERE}"}, environ={}) == "${NOT_SET_ANYWHERE}"
