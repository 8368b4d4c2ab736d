"""``engram serve`` runs the functions' handlers it is given: ``engram`` imports no function, the
``engram`` command (``functions.local.main``) hands them over, and only ``serve`` loads them."""

from __future__ import annotations

from typing import Any

import pytest
from functions.ingest import handler as ingest
from functions.local import handlers, main
from functions.maintenance import handler as maintenance

from engram import cli
from engram.local.app import REQUIRED_FUNCTIONS, FunctionHandlers, build_app
from engram.settings import Settings

SETTINGS = Settings()


def test_the_map_holds_every_function_engram_serve_runs() -> None:
    given = handlers()
    assert set(REQUIRED_FUNCTIONS) <= set(given)
    assert given["ingest"] is ingest.handler
    assert given["maintenance"] is maintenance.handler


def test_a_missing_handler_is_refused_by_name() -> None:
    partial = {k: v for k, v in handlers().items() if k != "ingest_consumer"}
    with pytest.raises(ValueError, match="ingest_consumer"):
        build_app(SETTINGS, handlers=partial, durable_queues=False)


def test_the_maintenance_timer_runs_the_maintenance_handler_when_given() -> None:
    with_it = build_app(SETTINGS, handlers=handlers(), durable_queues=False)
    without = {k: v for k, v in handlers().items() if k != "maintenance"}
    assert with_it.scheduler is not None
    assert build_app(SETTINGS, handlers=without, durable_queues=False).scheduler is None


def test_serve_without_handlers_says_how_to_start_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["serve"]) == 2
    assert "python -m functions.local serve" in capsys.readouterr().err


def test_only_serve_loads_the_handlers(capsys: pytest.CaptureFixture[str]) -> None:
    loads: list[int] = []

    def loader() -> FunctionHandlers:
        loads.append(1)
        return handlers()

    assert cli.main(["--help"], handlers=loader) == 0
    assert "serve" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exited:  # argparse refuses the option before any load
        cli.main(["serve", "--no-such-option"], handlers=loader)
    assert exited.value.code == 2
    assert loads == []


def test_serve_is_given_the_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    from engram.local import serve

    seen: dict[str, Any] = {}

    def fake(argv: list[str], *, handlers: Any) -> int:
        seen.update(argv=argv, handlers=handlers)
        return 0

    monkeypatch.setattr(serve, "main", fake)
    assert cli.main(["serve", "--port", "1"], handlers=handlers) == 0
    assert seen == {"argv": ["--port", "1"], "handlers": handlers}


def test_the_engram_command_is_the_cli_with_the_handlers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: dict[str, Any] = {}

    def fake(argv: list[str] | None, *, handlers: Any) -> int:
        seen.update(argv=argv, handlers=handlers)
        return 7

    monkeypatch.setattr(cli, "main", fake)
    assert main(["serve"]) == 7
    assert seen == {"argv": ["serve"], "handlers": handlers}
