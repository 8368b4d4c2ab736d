from __future__ import annotations

import io
import json

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from engram.adapters.bedrock_embedder import BedrockTitanEmbedder
from engram.errors import Unavailable


def client():  # type: ignore[no-untyped-def]
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def body(payload: dict[str, object]) -> StreamingBody:
    raw = json.dumps(payload).encode()
    return StreamingBody(io.BytesIO(raw), len(raw))


def test_invoke_model_request_and_response() -> None:
    c = client()
    embedder = BedrockTitanEmbedder(dimensions=256, client=c)
    with Stubber(c) as stub:
        for text in ("hello", "world"):
            stub.add_response(
                "invoke_model",
                {
                    "body": body({"embedding": [0.5] * 256, "inputTextTokenCount": 1}),
                    "contentType": "application/json",
                },
                {
                    "modelId": "amazon.titan-embed-text-v2:0",
                    "body": json.dumps({"inputText": text, "dimensions": 256, "normalize": True}),
                    "contentType": "application/json",
                    "accept": "application/json",
                },
            )
        vectors = embedder.embed(["hello", "world"])
        stub.assert_no_pending_responses()
    assert len(vectors) == 2
    assert vectors[0] == [0.5] * 256


def test_errors_become_unavailable() -> None:
    c = client()
    embedder = BedrockTitanEmbedder(dimensions=256, client=c)
    with Stubber(c) as stub:
        stub.add_client_error("invoke_model", "ThrottlingException", http_status_code=429)
        with pytest.raises(Unavailable):
            embedder.embed(["x"])
        stub.add_response(
            "invoke_model", {"body": body({"embedding": [1.0]}), "contentType": "application/json"}
        )
        with pytest.raises(Unavailable):
            embedder.embed(["x"])


def test_dimensions_are_checked_and_client_is_lazy() -> None:
    with pytest.raises(ValueError, match="dimensions"):
        BedrockTitanEmbedder(dimensions=100)
    e = BedrockTitanEmbedder(dimensions=1024)
    assert e._client.made is None  # nothing created at construction
    assert e.dimensions == 1024
