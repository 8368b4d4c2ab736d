"""Import hygiene and the settings-driven extractor choice."""

from __future__ import annotations

import subprocess
import sys

from tests.unit.extraction.fakes import make_job

from engram.adapters.bedrock_extractor import BedrockConverseExtractor, build_extractor
from engram.extraction import RuleBasedExtractor
from engram.settings import Settings


def test_importing_extraction_loads_no_sdk_and_connects_to_nothing() -> None:
    code = (
        "import sys\n"
        "import engram.extraction, engram.adapters.bedrock_extractor\n"
        "banned = ('boto3', 'botocore', 'redis', 'psycopg', 'psycopg_pool',"
        " 'aws_lambda_powertools')\n"
        "print(','.join(m for m in banned if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""


def test_build_extractor_follows_settings() -> None:
    assert isinstance(build_extractor(Settings(extractor="rules")), RuleBasedExtractor)
    bedrock = build_extractor(
        Settings(
            extractor="bedrock",
            bedrock_extraction_model_id="eu.anthropic.m-1",
            aws_region="eu-west-1",
        )
    )
    assert isinstance(bedrock, BedrockConverseExtractor)
    request = bedrock.request(make_job("hi"), persona_prompt=None, persona_scope=False)
    assert request["modelId"] == "eu.anthropic.m-1"  # a profile id goes as is
