"""``python -m engram.api.openapi > docs/openapi.json``: the document of the route table."""

from __future__ import annotations

import json
import sys

from engram.api.openapi import openapi_document
from engram.api.routes import ROUTES


def main() -> int:
    json.dump(openapi_document(ROUTES), sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
