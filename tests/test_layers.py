"""The house's floor plan, checked: the layers the tree shows are the layers the imports follow.

runner/'s packages are layered, lowest first (README, "Architecture"). A module imports from
its own layer or lower ones, never higher; no module loads another by a "module:Class" string;
there are no import circles (a function-level import counts, a TYPE_CHECKING one does not, as it
never runs); and the size rules hold. A reviewer repeats these with `pytest tests/test_layers.py`.

Slow: parsing every module of runner/ takes about two seconds on a small machine, so
`make test-fast` leaves these checks to `make test`.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

RUNNER = Path(__file__).resolve().parent.parent / "runner"

# lowest first; the root's three modules are layers of their own
LAYERS = [
    "errors",
    "stack_port",  # the local stack's default port, which the warm CLI reads without the settings
    "principal",
    "config",
    "telemetry",  # spans and metrics, off unless OTEL_* asks: any layer above may report to it
    "supabase_auth",  # a hosted project's Supabase Auth over HTTP: kiwi login and the console sign in with it
    "core",
    "registry",
    "search",
    "trust",
    "sandbox",
    "primitives",
    "policy",
    "harness",
    "mcp_client",  # Kiwi calling other MCP servers: the pool, import, outgoing OAuth
    "handlers",
    "fleet",  # runs that outlive the request: the queue's client side and `kiwi worker`
    "mcp_server",  # what agents call: the meta-tools, transports, incoming auth
    "console",  # what people use: the web console over the registry, as the person signed in
    "cli",
    "testing",  # what tests and benches share: drives Kiwi from outside, imported by no other layer
]
MAX_ROOT_MODULES = 12
MAX_FUNCTION_LINES = 120
MAX_MODULE_LINES = 600


def _module_name(path: Path) -> str:
    parts = path.relative_to(RUNNER.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    """Every module of runner/ by its dotted name (found once; the checks only read it)."""
    return {_module_name(p): p for p in sorted(RUNNER.rglob("*.py"))}


def _type_checking_lines(nodes: tuple[ast.AST, ...]) -> set[int]:
    lines: set[int] = set()
    for node in nodes:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


# what holds statements: an import, an `if`, a def is a statement, never inside an expression
_HOLDS_STATEMENTS = (ast.stmt, ast.excepthandler, ast.match_case)


@cache
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    """Every statement of a module however deeply nested, parsed and walked once for all the
    checks below (which only read them); the expressions, most of a tree, are not walked."""
    found: list[ast.AST] = []
    todo = deque([ast.parse(path.read_text())])
    while todo:
        node = todo.popleft()
        found.append(node)
        for _, value in ast.iter_fields(node):
            if isinstance(value, list):
                todo.extend(item for item in value if isinstance(item, _HOLDS_STATEMENTS))
    return tuple(found)


@cache
def _imports(name: str, path: Path) -> tuple[tuple[str, int], ...]:
    """The runner modules `name` imports when it runs, with the line of each import; found once
    for all the checks below."""
    return tuple(_find_imports(name, path, _modules()))


def _find_imports(name: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, int]]:
    nodes = _nodes(path)
    skip = _type_checking_lines(nodes)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in nodes:
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "runner")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "runner":
                continue
            for alias in node.names:  # `from . import x` imports the module x
                sub = f"{target}.{alias.name}"
                yield (sub if sub in modules else target), node.lineno


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def test_no_module_imports_from_a_higher_layer() -> None:
    modules = _modules()
    upward = []
    for name, path in modules.items():
        mine = _layer(name)
        for target, line in _imports(name, path):
            theirs = _layer(target)
            if mine and theirs and LAYERS.index(theirs) > LAYERS.index(mine):
                upward.append(f"{path.relative_to(RUNNER.parent)}:{line} {name} -> {target}")
    assert upward == []


def test_every_package_stands_on_a_layer() -> None:
    """A package missing from LAYERS would be checked by nothing above: each must be placed."""
    packages = sorted(p.parent.name for p in RUNNER.glob("*/__init__.py"))
    roots = sorted(p.stem for p in RUNNER.glob("*.py") if p.name != "__init__.py")
    assert [name for name in packages + roots if name not in LAYERS] == []


def test_the_server_may_use_the_client_and_handlers_never_the_server() -> None:
    """Kiwi's MCP server (what agents call) stands above the handlers, which stand above its MCP
    client (what Kiwi calls): a client module or a handler importing the server is an upward edge."""
    assert LAYERS.index("mcp_client") < LAYERS.index("handlers") < LAYERS.index("mcp_server")
    modules = _modules()
    edges = {
        (_layer(name), _layer(target))
        for name, path in modules.items()
        if _layer(name) in ("mcp_client", "handlers", "mcp_server")
        for target, _ in _imports(name, path)
    }
    assert ("mcp_server", "mcp_client") in edges  # the server does use the client: the rule is not vacuous
    assert ("handlers", "mcp_client") in edges
    assert not {("mcp_client", "mcp_server"), ("handlers", "mcp_server"), ("mcp_client", "handlers")} & edges


def test_no_module_imports_the_package_facade() -> None:
    """runner/__init__.py re-exports the public API from every layer: importing it from inside
    would make every layer depend on every other."""
    modules = _modules()
    inward = [
        f"{name} (line {line})"
        for name, path in modules.items()
        if name != "runner"
        for target, line in _imports(name, path)
        if target == "runner"
    ]
    assert inward == []


def test_no_module_is_loaded_by_a_string() -> None:
    """Handlers are assembled at the entry points with ordinary imports; a "module:Class" string
    hides an edge from every reader and from the circle check below."""
    pattern = re.compile(r"""["']runner(\.\w+)+:\w+["']|import_module\(""")
    loaded = [
        f"{path.relative_to(RUNNER.parent)}:{n}"
        for name, path in _modules().items()
        if name != "runner"  # the facade loads its exports lazily, by name (test_public_api.py)
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert loaded == []


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_there_are_no_import_circles() -> None:
    modules = _modules()
    graph = {
        name: {t for t, _ in _imports(name, path) if t in modules and t != name and t != "runner"}
        for name, path in modules.items()
    }
    # a package's __init__ importing its own submodules is how packages re-export; not a circle
    for name in graph:
        graph[name] = {t for t in graph[name] if not (t.startswith(name + ".") and modules[name].name == "__init__.py")}
    assert _cycle(graph) is None


def test_the_root_holds_at_most_twelve_modules() -> None:
    root = sorted(p.name for p in RUNNER.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


def test_no_module_is_over_six_hundred_lines_and_no_function_over_one_hundred_twenty() -> None:
    long_modules, long_functions = [], []
    for path in _modules().values():
        text = path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long_modules.append(str(path.relative_to(RUNNER.parent)))
        for node in _nodes(path):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    long_functions.append(f"{path.relative_to(RUNNER.parent)}:{node.lineno} {node.name} ({size})")
    assert (long_modules, long_functions) == ([], [])


def test_the_checks_see_an_upward_import_and_a_circle() -> None:
    """The checks above can fail: they find an upward edge and a circle in made-up graphs."""
    assert _layer("runner.cli.main") == "cli" and LAYERS.index("cli") > LAYERS.index("core")
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
