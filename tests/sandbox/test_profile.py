"""The sandbox profile as the runner reads it from a plan's config: defaults, shape, clear errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner import ConfigError
from runner.sandbox import Limits, Profile, profile_from


def test_no_profile_is_no_network_no_paths_and_the_default_limits() -> None:
    profile = profile_from(None, "t", {})
    assert profile == Profile()
    assert profile.describe() == {
        "network": "none",
        "fs": {"read": [], "write": []},
        "limits": {"memory_mb": 1024, "pids": 256, "cpu_s": 300, "file_mb": 512, "open_files": 1024},
    }


def test_network_entries_are_normalised_sorted_and_deduplicated() -> None:
    profile = profile_from({"network": ["API.example.com:443", "127.0.0.1:8080", "api.example.com:443"]}, "t", {})
    assert profile.network == ("127.0.0.1:8080", "api.example.com:443")


@pytest.mark.parametrize("entry", ["example.com", "example.com:0", "example.com:70000", "http://x:80", "a b:1", ":80"])
def test_a_network_entry_that_is_not_host_port_is_refused_naming_it(entry: str) -> None:
    with pytest.raises(ConfigError, match="is not host:port"):
        profile_from({"network": [entry]}, "t", {})


@pytest.mark.parametrize(
    ("limits", "words"),
    [({"pids": 0}, "must be a positive number"), ({"pids": True}, "positive number"), ({"disk_mb": 5}, "unknown")],
)
def test_a_bad_limit_is_refused_naming_it(limits: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        profile_from({"limits": limits}, "t", {})


def test_limits_not_given_keep_the_base(tmp_path: Path) -> None:
    base = Profile(limits=Limits(memory_mb=64, pids=16))
    assert profile_from({"limits": {"pids": 8}}, "t", {}, base=base).limits == Limits(memory_mb=64, pids=8)


def test_paths_expand_variables_resolve_and_must_exist(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    profile = profile_from({"fs": {"read": ["${DATA_ROOT}/data"]}}, "t", {"DATA_ROOT": str(tmp_path)})
    assert profile.read == (str(tmp_path / "data"),)
    with pytest.raises(ConfigError, match="does not exist"):
        profile_from({"fs": {"write": [str(tmp_path / "missing")]}}, "t", {})
    with pytest.raises(ConfigError, match="whole filesystem"):
        profile_from({"fs": {"read": ["/"]}}, "t", {})


def test_a_relative_path_is_the_runners_working_directorys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "node_modules").mkdir()
    monkeypatch.chdir(tmp_path)
    assert profile_from({"fs": {"read": ["node_modules"]}}, "t", {}).read == (str(tmp_path / "node_modules"),)


def test_a_path_through_a_link_a_sandbox_could_have_planted_is_refused(tmp_path: Path) -> None:
    # Found while building the sandbox: the registry narrows paths as text, so a link that a
    # tool with write access made would carry a narrowed path anywhere. A root runner's
    # sandboxes write as nobody; any other runner's, as itself (then every link is suspect).
    (tmp_path / "real").mkdir()
    link = tmp_path / "planted"
    link.symlink_to("/etc")
    if os.geteuid() == 0:
        os.lchown(link, 65534, 65534)
    with pytest.raises(ConfigError, match="symlink"):
        profile_from({"fs": {"read": [str(link)]}}, "t", {})
    own = tmp_path / "own"
    own.symlink_to(tmp_path / "real")
    if os.geteuid() == 0:  # root's own link is the machine's, not a sandbox's
        assert profile_from({"fs": {"read": [str(own)]}}, "t", {}).read == (str(tmp_path / "real"),)
    else:
        with pytest.raises(ConfigError, match="symlink"):
            profile_from({"fs": {"read": [str(own)]}}, "t", {})


def test_a_path_whose_variable_expands_to_nothing_grants_nothing(tmp_path: Path) -> None:
    """deno_runtime grants "${KIWI_DENO_DIR:-}": unset, no path (not the working directory, which
    an empty path would otherwise resolve to); a literal empty path is refused."""
    assert profile_from({"fs": {"read": ["${KIWI_DENO_DIR:-}"]}}, "t", {}).read == ()
    assert profile_from({"fs": {"read": ["${KIWI_DENO_DIR:-}"]}}, "t", {"KIWI_DENO_DIR": str(tmp_path)}).read == (
        str(tmp_path),
    )
    with pytest.raises(ConfigError, match="empty path"):
        profile_from({"fs": {"write": [""]}}, "t", {})


def test_a_missing_path_from_a_setting_names_the_setting_and_its_value_here(tmp_path: Path) -> None:
    """The seeded Node MCP servers read ${KIWI_NODE_MODULES:-node_modules}: outside the clone,
    `kiwi mcp import everything_mcp` failed naming only 'node_modules', not the setting."""
    fs = {"fs": {"read": ["${KIWI_NODE_MODULES:-node_modules}"]}}
    with pytest.raises(ConfigError, match="does not exist on this machine") as info:
        profile_from(fs, "t", {}, cwd=tmp_path)
    root = Path(__file__).resolve().parents[2]
    assert info.value.hint is not None and "${KIWI_NODE_MODULES}, which is not set" in info.value.hint
    assert f"export KIWI_NODE_MODULES={root / 'node_modules'}" in info.value.hint
    with pytest.raises(ConfigError) as info:
        profile_from({"fs": {"read": ["${DATA_DIR}/in"]}}, "t", {"DATA_DIR": str(tmp_path / "gone")})
    assert (
        info.value.hint == f"'{tmp_path}/gone/in' comes from ${{DATA_DIR}}: export DATA_DIR=<its path on this machine>"
    )
    with pytest.raises(ConfigError) as info:
        profile_from({"fs": {"read": [str(tmp_path / "gone")]}}, "t", {})
    assert info.value.hint is None, "a path written out needs no setting"
