"""Answers as the service gives them, one per route, and scripted answers, for clients run
over a mock transport."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

MEMORY: dict[str, Any] = {
    "id": "m1",
    "scope": "user",
    "ownerId": "alice",
    "userId": "alice",
    "key": "k",
    "value": "v",
    "sourceChannelId": None,
    "confidence": 0.9,
    "status": "active",
    "createdAt": 1,
    "updatedAt": 1,
}
FACT: dict[str, Any] = {
    "id": "f1",
    "identityId": "acme:alice",
    "category": "tool_preference",
    "subject": "get_account",
    "content": "uses get_account",
    "confidence": 0.7,
    "reinforcementCount": 3,
    "lastReinforcedAt": 1,
    "createdAt": 1,
    "updatedAt": 1,
}
SESSION: dict[str, Any] = {
    "identityId": "acme:alice",
    "personaId": None,
    "facts": [FACT],
    "toolAffinities": {"get_account": 0.8, "search": 0.3},
    "memories": [MEMORY],
    "prompt": "## What you know\n- k: v",
    "sections": {"facts": "", "memories": "- k: v"},
    "degraded": [],
}
ACCEPTED: dict[str, Any] = {"accepted": 1, "ids": ["o1"]}
PERSONA: dict[str, Any] = {
    "personaId": "p1",
    "teamId": "acme",
    "allowedGroups": [],
    "memoryEnabled": True,
    "extraction": {"enabled": False},
    "retention": {"archiveAfterDays": None, "deleteArchivedAfterDays": None},
}


def body_for(request: httpx.Request) -> tuple[int, Any]:
    """The status and body the service answers ``request`` with when all goes well."""
    method, path = request.method, request.url.path
    if method == "DELETE" and path != "/v1/me":
        return 204, None
    if path in ("/v1/events", "/v1/observations"):
        return 202, ACCEPTED
    if path == "/v1/sessions":
        return 200, SESSION
    if path == "/v1/health":
        return 200, {"status": "ok", "version": "0.1.0", "redis": "ok", "postgres": "ok"}
    if path == "/v1/tools/rank":  # the service's ranking, over SESSION's affinities
        affinities = SESSION["toolAffinities"]
        ranked = [
            {
                "name": c["name"],
                "score": c["score"],
                "affinity": affinities.get(c["name"], 0.0),
                "boostedScore": c["score"] + 2 * affinities.get(c["name"], 0.0),
            }
            for c in json.loads(request.content)["candidates"]
        ]
        ranked.sort(key=lambda t: -t["boostedScore"])
        return 200, {"tools": ranked, "boostFactor": 2.0, "degraded": []}
    if path.startswith("/v1/tools/"):
        return 200, {"name": path.rsplit("/", 1)[1], "result": {"memories": []}}
    if path == "/v1/tools":
        return 200, {"tools": []}
    if path == "/v1/facts":
        return 200, {"facts": [FACT]}
    if path.startswith("/v1/personas/"):
        return 200, PERSONA
    if path == "/v1/settings/team":
        return 200, {"teamId": "acme", "memoryEnabled": True}
    if path == "/v1/memories" and method == "GET":
        return 200, {"memories": [MEMORY]}
    if path.startswith("/v1/memories"):
        return (201 if method == "POST" else 200), MEMORY
    raise AssertionError(f"no answer for {method} {path}")


def respond(request: httpx.Request) -> httpx.Response:
    status, body = body_for(request)
    return httpx.Response(status) if body is None else httpx.Response(status, json=body)


Step = Callable[[httpx.Request], httpx.Response]


class Script:
    """Answers request n with steps[n] (the last step repeats); records every request."""

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.steps[min(len(self.requests), len(self.steps)) - 1](request)

    def keys(self) -> list[str | None]:
        return [r.headers.get("idempotency-key") for r in self.requests]
