from pathlib import Path

import pytest
from pydantic import ValidationError

from engram.settings import Settings, env_name

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_setting_is_documented_in_the_readme() -> None:
    text = README.read_text()
    missing = [env_name(n) for n in Settings.model_fields if env_name(n) not in text]
    assert missing == [], f"add to README (python -m engram.settings prints the table): {missing}"


def test_every_setting_has_a_description() -> None:
    assert [n for n, f in Settings.model_fields.items() if not f.description] == []


def test_settings_come_from_engram_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_CONSOLIDATION_BUDGET_MS", "750")
    monkeypatch.setenv("REDIS_URL", "redis://example.invalid:6379/0")
    s = Settings()
    assert s.consolidation_budget_ms == 750
    assert s.redis_url == "redis://example.invalid:6379/0"


def test_bad_setting_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_DECAY", "linear")
    with pytest.raises(ValidationError, match="decay"):
        Settings()
