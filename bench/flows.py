"""How far a request travels: ``python -m bench.flows [REV ...]``.

For three requests — ``POST /v1/events`` (until its observations are in Redis, through the
ingest queue and its consumer), ``POST /v1/sessions`` and ``POST
/v1/tools/memory_save?format=anthropic`` — counts, while the request is served by the local
service (``bench.local.serve``: the Lambda handlers behind the local gateway, over a private
``redis-server`` and an embedded PostgreSQL):

* **modules**: the modules of ``engram`` and ``functions`` whose code runs (a profiler on every
  thread), leaving out ``engram.local``, which stands in for API Gateway, SQS and Lambda;
* **shapes**: the distinct types of the values those functions return (``None``, booleans and
  numbers left out): the forms the request's data takes on its way (a model, a dict, JSON
  text, a command …).

Each revision named runs in a checkout of its own (``git worktree``) with its own harness;
none named: this working tree. Prints one line per flow and revision, and with ``--json`` the
modules and shapes themselves.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

_SKIPPED_TYPES = {"NoneType", "bool", "int", "float"}


def _flows() -> dict[str, dict[str, list[str]]]:
    """Run in the child: each flow once warm, then once traced."""
    import sys as _sys
    import threading
    import time
    import uuid

    import httpx
    import redis

    from bench.bench_consolidation import redis_url
    from bench.local import embedded_postgres, serve
    from engram.bootstrap import set_container

    seen_modules: set[str] = set()
    seen_shapes: set[str] = set()
    active = threading.Event()

    def counted(module: str) -> bool:
        return (module.startswith(("engram.", "functions.")) or module == "engram") and not (
            module.startswith("engram.local")
        )

    def profile(frame: Any, event: str, arg: Any) -> None:
        if not active.is_set():
            return
        module = frame.f_globals.get("__name__", "")
        if not counted(module):
            return
        if event == "call":
            seen_modules.add(module)
        elif event == "return":
            kind = type(arg)
            if kind.__name__ not in _SKIPPED_TYPES:
                seen_shapes.add(f"{kind.__module__}.{kind.__qualname__}")

    def traced(run: Any, done: Any = None) -> dict[str, list[str]]:
        seen_modules.clear()
        seen_shapes.clear()
        active.set()
        try:
            run()
            if done is not None:
                deadline = time.monotonic() + 30
                while not done():
                    if time.monotonic() > deadline:
                        raise RuntimeError("the flow did not finish in 30 s")
                    time.sleep(0.01)
        finally:
            active.clear()
        return {"modules": sorted(seen_modules), "shapes": sorted(seen_shapes)}

    # every thread the service starts inherits the profiler, which counts only while active
    threading.setprofile(profile)
    _sys.setprofile(profile)
    out: dict[str, dict[str, list[str]]] = {}
    with embedded_postgres("engram-bench-flows-") as (database_url, root), redis_url() as url:
        prefix = f"fl{uuid.uuid4().hex[:6]}"
        served = serve(url, prefix, root, database_url=database_url, events_poll_ms=60_000)
        client = redis.Redis.from_url(url)
        token = served.signer.issue("flows", "bench")
        http = httpx.Client(
            base_url=served.service.url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=60,
        )
        try:
            events = {
                "events": [
                    {"kind": "query", "text": "What royalties did ACME earn last quarter?"},
                    {
                        "kind": "tool",
                        "toolName": "get_account",
                        "ok": True,
                        "durationMs": 120,
                        "result": {"accountId": "A-17", "name": "ACME Music"},
                    },
                ]
            }

            def stored() -> int:
                return sum(
                    int(client.zcard(key))
                    for key in client.scan_iter(f"{prefix}*obs*")
                    if client.type(key) == b"zset"
                )

            def post_events(n: int) -> Any:
                def run() -> None:
                    body = json.loads(json.dumps(events))
                    body["events"][0]["text"] += f" ({n})"
                    res = http.post("/v1/events", json=body)
                    assert res.status_code == 202, res.text

                return run

            before = stored()
            post_events(0)()
            deadline = time.monotonic() + 30
            while stored() == before and time.monotonic() < deadline:
                time.sleep(0.01)
            target = stored() + 1
            out["POST /v1/events"] = traced(post_events(1), lambda: stored() >= target)

            def session() -> None:
                res = http.post("/v1/sessions", json={"query": "royalties"})
                assert res.status_code == 200, res.text

            session()
            out["POST /v1/sessions"] = traced(session)

            call = {
                "type": "tool_use",
                "id": "toolu_01",
                "name": "memory_save",
                "input": {"key": "favourite editor", "value": "helix"},
            }

            def tool_call() -> None:
                res = http.post("/v1/tools/memory_save?format=anthropic", json=call)
                assert res.status_code == 200, res.text

            tool_call()
            out["POST /v1/tools/memory_save?format=anthropic"] = traced(tool_call)
        finally:
            http.close()
            served.service.stop()
            set_container(None)
            client.close()
    return out


def main(argv: list[str] | None = None) -> int:
    # here, not at the top: the child that runs ``_flows`` imports another checkout's ``bench``
    from bench.ab import checkout, remove, run_in_tree

    parser = argparse.ArgumentParser(prog="python -m bench.flows", description=__doc__)
    parser.add_argument("revs", nargs="*", help="revisions (default: this working tree)")
    parser.add_argument("--json", action="store_true", help="print the modules and shapes")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="engram-flows-") as scratch:
        for index, rev in enumerate(args.revs or [None]):
            if rev is None:
                results["working tree"] = run_in_tree(ROOT, Path(__file__), "_flows")
                continue
            tree = checkout(rev, Path(scratch) / str(index))
            try:
                results[rev] = run_in_tree(tree, Path(__file__), "_flows")
            finally:
                remove(tree)
    for rev, flows in results.items():
        for flow, found in flows.items():
            print(
                f"{rev:<14} {flow:<48} {len(found['modules']):>3} modules "
                f"{len(found['shapes']):>3} shapes"
            )
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
