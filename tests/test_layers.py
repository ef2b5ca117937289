"""The layers of memory/ hold: no import cycles, no import from a higher layer, no host framework, no huge module;
and the adapters beside it stay thin: each one known and short, all of them within one budget (logic leaving an
adapter goes into the service, not into another adapter), reaching `memory` only through its public face, which
stays small.

Reads the source with `ast` (nothing is imported), so a function-level import counts as much as a top-level one.
"""

from __future__ import annotations

import ast
from pathlib import Path

MEMORY = Path(__file__).resolve().parents[1] / "memory"

# Layer of each top-level name under memory/ (bottom to top); a module imports only from its own layer or below.
LAYERS: dict[str, int] = {
    # 0: models and basics
    "_models": 0,
    "_errors": 0,
    "_text": 0,
    "_settings": 0,
    "_settings_layout": 0,
    "_fence": 0,
    "_reply_json": 0,
    "_logthrottle": 0,
    "_limiter": 0,
    "_gcfreeze": 0,
    "_prompt": 0,
    # 1: where things are kept, and the pure rules for changing them
    "_storage": 1,
    "_rules": 1,
    "_pictures": 1,
    # 2: features
    "_privacy": 2,
    "_recall": 2,
    "_todos": 2,
    "_episodes": 2,
    "_observation": 2,
    "_extraction": 2,
    "_aging": 2,
    "_manage": 2,
    "_members": 2,
    "_admin": 2,
    "_tools": 2,
    "_status": 2,
    "_analysis": 2,
    # 3: the composition root
    "_service": 3,
    # the package's public face sits on top of everything it exports
    "__init__": 4,
}

FORBIDDEN_PACKAGES = ("astrbot", "starlette", "quart")

MAX_LINES = 600

REPO = MEMORY.parent
# The modules beside memory/: AstrBot's side of the plugin. A new one is listed here on purpose, or not at all.
ADAPTERS = (
    "main.py",
    "dashboard.py",
    "host_ports.py",
    "attachments.py",
    "reply_pictures.py",
    "persona_tools.py",
    "astrbot_support.py",
)
MAX_ADAPTER_LINES = 450
ADAPTER_LINES_BUDGET = 1400  # all of them together
MAX_PUBLIC_NAMES = 20


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(MEMORY.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(MEMORY.rglob("*.py"))}


MODULES = _modules()


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """The memory modules a `from ... import ...` names: the module itself, or its submodules when it imports them."""
    package = module if is_package else module.rpartition(".")[0]
    if node.level:
        base = package.split(".")
        if node.level > 1:
            base = base[: -(node.level - 1)]
        target = ".".join([*base, node.module] if node.module else base)
    else:
        target = node.module or ""
    if target != "memory" and not target.startswith("memory."):
        return []
    found = []
    for alias in node.names:
        submodule = f"{target}.{alias.name}"
        found.append(submodule if submodule in MODULES else target)
    return found


def _imports_of(module: str, is_package: bool, source: str) -> list[tuple[str, int]]:
    """The memory modules `source` imports anywhere in it (functions, `try` blocks too), with the line of each."""
    edges: set[tuple[str, int]] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            edges.update((target, node.lineno) for target in _resolve(module, is_package, node))
        elif isinstance(node, ast.Import):
            edges.update((a.name, node.lineno) for a in node.names if a.name.startswith("memory."))
    return sorted((target, line) for target, line in edges if target in MODULES and target != module)


def _imports() -> dict[str, list[tuple[str, int]]]:
    """Each memory module's imports of other memory modules, with the line they are on."""
    return {
        module: _imports_of(module, path.name == "__init__.py", path.read_text(encoding="utf-8"))
        for module, path in MODULES.items()
    }


def _external_imports(path: Path) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, node.lineno))
    return found


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _layer(module: str) -> int:
    top = _top(module)
    assert top in LAYERS, f"{module}: {top} has no layer in LAYERS; give it one"
    return LAYERS[top]


def _where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(MEMORY.parent)}:{line}"


def _cycles(graph: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target, _ in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return components


def test_the_import_graph_is_read():
    source = """
from .. import _errors
from .._models import GroupKey
from . import base, changelog
import memory._text

def later():
    from .._storage.files import read_bytes
"""
    assert _imports_of("memory._storage.store", False, source) == [
        ("memory._errors", 2),
        ("memory._models", 3),
        ("memory._storage.base", 4),
        ("memory._storage.changelog", 4),
        ("memory._storage.files", 8),
        ("memory._text", 5),
    ]
    assert _imports_of("memory._storage", True, "from .base import X") == [("memory._storage.base", 1)]


def test_no_import_cycles():
    graph = _imports()
    problems = []
    for component in _cycles(graph):
        members = set(component)
        edges = [
            f"    {_where(module, line)} imports {target}"
            for module in component
            for target, line in graph[module]
            if target in members
        ]
        problems.append(f"cycle between {', '.join(component)}:\n" + "\n".join(edges))
    assert not problems, "\n".join(problems)


def test_no_import_from_a_higher_layer():
    graph = _imports()
    problems = [
        f"{_where(module, line)}: {module} (layer {_layer(module)}) imports {target} (layer {_layer(target)})"
        for module, edges in graph.items()
        for target, line in edges
        if _layer(target) > _layer(module)
    ]
    assert not problems, "\n".join(problems)


def test_every_top_level_name_has_a_layer():
    assert not {_top(module) for module in MODULES} - LAYERS.keys()


def test_no_host_framework_is_imported():
    problems = [
        f"{path.relative_to(MEMORY.parent)}:{line} imports {name}"
        for path in MODULES.values()
        for name, line in _external_imports(path)
        if name.split(".")[0] in FORBIDDEN_PACKAGES
    ]
    assert not problems, "\n".join(problems)


def test_no_module_is_too_long():
    lengths = {
        str(path.relative_to(MEMORY.parent)): len(path.read_text(encoding="utf-8").splitlines())
        for path in MODULES.values()
    }
    problems = [f"{name}: {lines} lines (at most {MAX_LINES})" for name, lines in lengths.items() if lines > MAX_LINES]
    assert not problems, "\n".join(problems)


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _public_face() -> tuple[list[str], set[str]]:
    """`memory.__all__`, and every name memory/__init__.py binds that does not start with "_"."""
    tree = ast.parse((MEMORY / "__init__.py").read_text(encoding="utf-8"))
    exported: list[str] = []
    bound: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            exported = list(ast.literal_eval(node.value))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
    return exported, {name for name in bound if not name.startswith("_") and name != "annotations"}


def test_every_module_beside_memory_is_a_known_adapter():
    assert sorted(path.name for path in REPO.glob("*.py")) == sorted(ADAPTERS)


def test_no_adapter_is_too_long_and_all_stay_within_one_budget():
    lengths = {name: _lines(REPO / name) for name in ADAPTERS}
    problems = [
        f"{name}: {n} lines (at most {MAX_ADAPTER_LINES})" for name, n in lengths.items() if n > MAX_ADAPTER_LINES
    ]
    assert not problems, "\n".join(problems)
    assert sum(lengths.values()) <= ADAPTER_LINES_BUDGET, f"the adapters hold {sum(lengths.values())} lines: {lengths}"


def _private_reaches(name: str, source: str, exported: list[str]) -> list[str]:
    """Where an adapter's `source` imports from memory anything but the names of `exported` (memory.__all__)."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module.startswith("memory."):
                problems.append(f"{name}:{node.lineno} imports {module}")
            elif module == "memory":
                problems += [
                    f"{name}:{node.lineno} imports memory.{a.name}" for a in node.names if a.name not in exported
                ]
            elif node.level and not module and any(a.name == "memory" for a in node.names):
                problems.append(f"{name}:{node.lineno} imports the package memory itself")
        elif isinstance(node, ast.Import):
            problems += [
                f"{name}:{node.lineno} imports {a.name}" for a in node.names if a.name.split(".")[0] == "memory"
            ]
    return problems


def test_a_private_reach_is_seen():
    source = """
from .memory import Settings, _fence
from .memory._pictures import check
from . import memory
import memory._text

def later():
    from .memory import GroupKey
"""
    assert _private_reaches("x.py", source, ["Settings", "GroupKey"]) == [
        "x.py:2 imports memory._fence",
        "x.py:3 imports memory._pictures",
        "x.py:4 imports the package memory itself",
        "x.py:5 imports memory._text",
    ]


def test_adapters_reach_memory_only_through_its_public_face():
    exported, _ = _public_face()
    problems = [
        problem
        for name in ADAPTERS
        for problem in _private_reaches(name, (REPO / name).read_text(encoding="utf-8"), exported)
    ]
    assert not problems, "\n".join(problems)


def test_the_public_face_is_small_and_is_all_of_it():
    exported, bound = _public_face()
    assert len(exported) <= MAX_PUBLIC_NAMES, f"memory exports {len(exported)} names: {exported}"
    assert bound == set(exported), "memory/__init__.py binds exactly the names of its __all__"
