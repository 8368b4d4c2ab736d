"""The route table is the one place a route is written: every other list is derived from it.

The resolvers of the HTTP functions, the local server, the OpenAPI document and the CDK stack
(tests/infrastructure/test_stacks.py) hold exactly the table's routes, each at the table's
function and answered by the endpoint the table names; the tests' own route lists are read
from the table too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from engram.api.openapi import TOOL_ROUTE, openapi_document
from engram.api.routes import HTTP_FUNCTIONS, PUBLIC_ROUTES, ROUTES, RouteSpec, routes_of
from engram.api.tools import TOOL_ARGUMENTS
from engram.local.app import FUNCTION_ROUTES

ROOT = Path(__file__).resolve().parents[3]


def test_each_route_is_written_once() -> None:
    keys = [r.route_key for r in ROUTES]
    assert len(keys) == len(set(keys))
    for function in HTTP_FUNCTIONS:
        handlers = [r.handler for r in routes_of(function)]
        assert len(handlers) == len(set(handlers)), function
        assert all(callable(h) for h in handlers), function
    assert {r.function for r in ROUTES} == set(HTTP_FUNCTIONS)


def test_only_health_and_the_openapi_document_are_public() -> None:
    public = {r.route_key for r in ROUTES if not r.auth}
    assert public == {"GET /v1/health", "GET /v1/openapi.json"} == PUBLIC_ROUTES


def test_the_local_server_maps_each_route_to_the_tables_function() -> None:
    derived = {key: function for function, keys in FUNCTION_ROUTES.items() for key in keys}
    assert derived == {r.route_key: r.function for r in ROUTES}


def test_the_openapi_document_holds_exactly_the_tables_routes() -> None:
    paths = openapi_document(ROUTES)["paths"]
    documented = {f"{method.upper()} {path}" for path, ops in paths.items() for method in ops}
    expected = {r.route_key for r in ROUTES if r.path != TOOL_ROUTE}
    expected |= {f"POST {TOOL_ROUTE.replace('{name}', tool)}" for tool in TOOL_ARGUMENTS}
    assert documented == expected


PROBE = """
import importlib, json, sys
module = importlib.import_module(f"functions.{sys.argv[1]}.handler")
routes = module.app._static_routes + module.app._dynamic_routes
print(json.dumps(sorted([r.method, r.path, r.func.__name__, r.func.__doc__] for r in routes)))
"""


@pytest.mark.parametrize("function", HTTP_FUNCTIONS)
def test_each_resolver_registers_exactly_its_functions_routes(function: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, function],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    registered = {tuple(r) for r in json.loads(out.stdout)}
    assert registered == {
        (r.method, r.resolver_rule, r.handler.__name__, r.handler.__doc__)
        for r in routes_of(function)
    }


def test_a_route_names_its_endpoint_itself_and_serialises_without_it() -> None:
    from engram.api.endpoints import memories

    route = next(r for r in ROUTES if r.route_key == "POST /v1/memories")
    assert route.handler is memories.post_memory
    assert "handler" not in route.model_dump()
    with pytest.raises(ValidationError):
        RouteSpec(method="GET", path="/v1/x", function="memories", handler="get_x", summary="x")


def test_resolver_rule_is_the_path_in_powertools_form() -> None:
    route = next(r for r in ROUTES if r.path == "/v1/memories/{id}/history")
    assert route.resolver_rule == "/v1/memories/<id>/history"
    assert route.path_parameters == ("id",)
    assert RouteSpec.model_fields["function"].is_required()
