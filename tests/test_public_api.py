"""The public API, pinned (as httpx pins its exported members).

`runner/__init__.py` exports what tests, benches and embedders use. Adding or removing a name
is an API change: it fails here until this list says so. Everything public is imported from
`runner`, never from the module behind it; a unit test of a private module may still import
that module's own internals, as httpx's tests do.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import runner

ROOT = Path(__file__).resolve().parent.parent

PUBLIC = [
    "__version__",
    "Embedder",
    "EmbeddingError",
    "LocalWordLlama",
    "OpenAICompatible",
    "embedder_from_settings",
    "embed_pending",
    "Call",
    "CallTool",
    "ChainLink",
    "ConfigError",
    "Denied",
    "Dispatcher",
    "Handler",
    "IntegrityError",
    "InvalidParameters",
    "Invocation",
    "KiwiError",
    "LOCAL_JWT_SECRET",
    "LOCAL_OWNER_ID",
    "McpPool",
    "MemoryBackend",
    "NotFound",
    "Outcome",
    "Plan",
    "PlanFile",
    "PostgresRegistry",
    "PrimitiveError",
    "Principal",
    "Refused",
    "Registry",
    "RegistryUnavailable",
    "RestRegistry",
    "RunResult",
    "Runner",
    "Sandbox",
    "SandboxUnavailable",
    "ServerSpec",
    "Settings",
    "ToolDir",
    "ToolRef",
    "TrustSettings",
    "UsageError",
    "acting_as",
    "admin",
    "anon",
    "build_server",
    "connect",
    "from_claims",
    "from_token",
    "import_server",
    "load_tool_dir",
    "local_owner",
    "opened",
    "sign_token",
    "standard_dispatcher",
    "standard_handlers",
]


def test_the_exported_names_are_the_pinned_ones() -> None:
    assert sorted(runner.__all__) == sorted(PUBLIC)
    assert set(runner._EXPORTS) == set(PUBLIC) - {"__version__"}  # each name has a source


@pytest.mark.parametrize("name", [n for n in PUBLIC if n != "__version__"])
def test_every_exported_name_resolves_to_the_object_its_module_defines(name: str) -> None:
    module, attribute = runner._EXPORTS[name]
    value = getattr(runner, name)
    assert value is getattr(__import__(f"runner.{module}", fromlist=[attribute]), attribute)
    assert name in dir(runner)


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        runner.Nope  # noqa: B018


def test_importing_the_package_loads_none_of_it() -> None:
    """Names load on first use: `import runner` pulls in no submodule, so the CLI's start-up and
    a script's `kiwi run` pay only for what they touch."""
    probe = "import sys, runner; print(sorted(m for m in sys.modules if m.startswith('runner.')))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]"


def _deep_imports_of_public_names() -> list[str]:
    exported = {(f"runner.{module}", attribute) for module, attribute in runner._EXPORTS.values()}
    # packages that re-export
    reexported_from = {"runner.registry", "runner.policy", "runner.handlers", "runner.search"}
    found = []
    for folder in ("tests", "bench", "scripts"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module):
                    continue
                if not node.module.startswith("runner."):
                    continue
                for alias in node.names:
                    if (node.module, alias.name) in exported or (
                        node.module in reexported_from and alias.name in runner.__all__
                    ):
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.module}.{alias.name}")
    return found


@pytest.mark.slow
def test_tests_benches_and_scripts_take_public_names_from_the_package() -> None:
    assert _deep_imports_of_public_names() == []
