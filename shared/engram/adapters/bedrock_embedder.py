"""Amazon Bedrock Titan Text Embeddings v2 (``amazon.titan-embed-text-v2:0``) via boto3.

The bedrock-runtime client is created on first use, never at import or construction.
Titan v2 takes one text per call and returns 256, 512 or 1024 dimensions (normalised).
"""

from __future__ import annotations

import json
from typing import Any

from engram.adapters.lazy import Lazy
from engram.errors import Unavailable
from engram.memories.models import RecallTuning
from engram.settings import Settings

TITAN_V2_DIMENSIONS = (256, 512, 1024)
MAX_INPUT_CHARS = 50_000


def _runtime_client(region: str) -> Any:
    import boto3
    from botocore.config import Config

    config = Config(connect_timeout=2, read_timeout=5, retries={"max_attempts": 2})
    return boto3.client("bedrock-runtime", region_name=region, config=config)


class BedrockTitanEmbedder:
    def __init__(
        self,
        *,
        model_id: str = "amazon.titan-embed-text-v2:0",
        dimensions: int = 1024,
        region: str = "us-east-1",
        client: Any = None,
    ) -> None:
        if dimensions not in TITAN_V2_DIMENSIONS:
            raise ValueError(
                f"Titan v2 supports {TITAN_V2_DIMENSIONS} dimensions, not {dimensions}"
            )
        self._model_id = model_id
        self._dimensions = dimensions
        self._client: Lazy[Any] = Lazy(lambda: _runtime_client(region), client)

    @classmethod
    def from_settings(cls, settings: Settings, client: Any = None) -> BedrockTitanEmbedder:
        return cls(
            model_id=settings.bedrock_embedding_model_id,
            dimensions=settings.embedding_dimensions,
            region=settings.aws_region,
            client=client,
        )

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def model_id(self) -> str:
        return f"{self._model_id}-{self._dimensions}"

    @property
    def tuning(self) -> RecallTuning:
        """Not measured yet (no Bedrock here): the defaults."""
        return RecallTuning()

    @property
    def client(self) -> Any:
        return self._client.get()

    def embed(self, texts: list[str]) -> list[list[float]]:
        from botocore.exceptions import BotoCoreError, ClientError

        out: list[list[float]] = []
        for text in texts:
            body = json.dumps(
                {
                    "inputText": text[:MAX_INPUT_CHARS],
                    "dimensions": self._dimensions,
                    "normalize": True,
                }
            )
            try:
                response = self.client.invoke_model(
                    modelId=self._model_id,
                    body=body,
                    contentType="application/json",
                    accept="application/json",
                )
                payload = json.loads(response["body"].read())
            except (BotoCoreError, ClientError) as exc:
                raise Unavailable(f"Bedrock embedding failed: {exc}") from exc
            vector = payload.get("embedding")
            if not isinstance(vector, list) or len(vector) != self._dimensions:
                raise Unavailable("Bedrock returned an embedding of the wrong shape")
            out.append([float(v) for v in vector])
        return out
