"""Write the JSON Schema of the message history format beside the protos.

`MessageHistory.data` (format "pydantic-ai.model-messages+json") is opaque to hosts on purpose;
this schema, generated from pydantic-ai's own `ModelMessagesTypeAdapter`, is for hosts that want to
read or build history anyway. The output is deterministic (sorted keys, two-space indent, trailing
newline) so a regeneration leaves no diff while pydantic-ai's version stays the same.

Usage: python scripts/history_schema.py [OUTPUT]   (default proto/threadline/v1/history.schema.json)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pydantic_ai.messages import ModelMessagesTypeAdapter

DEFAULT_OUTPUT = (
    Path(__file__).resolve().parent.parent / "proto" / "threadline" / "v1" / "history.schema.json"
)


def main(argv: list[str]) -> None:
    output = Path(argv[1]) if len(argv) > 1 else DEFAULT_OUTPUT
    schema = ModelMessagesTypeAdapter.json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "pydantic-ai.model-messages+json, format_version 1"
    output.write_text(
        json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
    )


if __name__ == "__main__":
    main(sys.argv)
