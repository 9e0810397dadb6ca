"""The idempotency digest of a thread request (THREADS §4 step 1): what a retry must say again.

A run record keeps the digest of the request that made it; a later request with the same `request_id`
replays the record when its digest matches and is `REQUEST_ID_REUSED` when it does not. The digest is
the core's, so a host embedding `DurableHost` gets it without protobuf: SHA-256 of canonical JSON
(sorted keys, compact) of what the request asks for under its key — `expected_revision`, the prompt,
the answers and the busy strategy. `tool_recovery`, client tools and usage limits are left out: each
attempt takes them from its own request. Values at their defaults are left out too (a pydantic-ai that
adds a field with a default does not change a digest), except each part's `kind`, which tells an
image URL from a document URL of the same address.

Versioned: `v2:` and the first 60 hex digits (240 bits; the record's 64-character column holds it
without a migration). Servers before v2 stored SHA-256 of the protobuf bytes of the `ThreadRunSpec`,
unprefixed; such a record is compared with the request's `legacy` digest, which the server still
computes from the wire (`docs/threads.md`, "Request digest").
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import TypeAdapter
from pydantic_ai.messages import UserContent
from pydantic_ai.tools import DeferredToolResults

from ..json_text import JsonValue, canonical_json

__all__ = (
    "DIGEST_PARTS",
    "DIGEST_VERSION",
    "BusyStrategy",
    "digest_differences",
    "request_digest",
    "request_digest_parts",
    "same_request",
)

DIGEST_VERSION = "v2:"
"""The prefix of every digest this core makes; a stored digest without it is a legacy one."""
_HEX_DIGITS = 60

BusyStrategy = Literal["reject", "enqueue", "interrupt", "rollback"]
"""What a request does when its thread is busy (LIVE §4.1): refused, queued after the others, or
queued first with the current run stopped (and, `rollback`, its commits discarded)."""

_PROMPT: TypeAdapter[str | list[UserContent]] = TypeAdapter(str | list[UserContent])
_ANSWERS: TypeAdapter[DeferredToolResults] = TypeAdapter(DeferredToolResults)


DIGEST_PARTS = ("prompt", "answers", "expected_revision", "busy_strategy")
"""The parts of a request's meaning, each digested on its own too (LIVE §5.5): `REQUEST_ID_REUSED` names
those in which a reused ID's request differs."""


def request_digest(
    *,
    expected_revision: int,
    input: str | Sequence[UserContent] | None,
    answers: DeferredToolResults | None,
    busy_strategy: BusyStrategy = "reject",
) -> str:
    """The `v2:` digest of a request's meaning; equal for two requests that ask for the same thing."""
    meaning = _meaning(expected_revision, input, answers, busy_strategy)
    hexdigest = hashlib.sha256(canonical_json(meaning).encode()).hexdigest()
    return DIGEST_VERSION + hexdigest[:_HEX_DIGITS]


def request_digest_parts(
    *,
    expected_revision: int,
    input: str | Sequence[UserContent] | None,
    answers: DeferredToolResults | None,
    busy_strategy: BusyStrategy = "reject",
) -> dict[str, str]:
    """One short digest per part of the request's meaning (`DIGEST_PARTS`), kept beside the digest."""
    meaning = _meaning(expected_revision, input, answers, busy_strategy)
    return {
        part: hashlib.sha256(canonical_json(meaning[_MEANING_KEY.get(part, part)]).encode()).hexdigest()[
            :_PART_HEX_DIGITS
        ]
        for part in DIGEST_PARTS
    }


def digest_differences(stored: dict[str, str] | None, parts: dict[str, str]) -> str:
    """The parts (`DIGEST_PARTS` order, comma-separated) in which a request differs from the record
    whose part digests are `stored`; `unknown` for a record made before they were kept."""
    if stored is None or any(part not in stored for part in DIGEST_PARTS):
        return "unknown"
    return ",".join(part for part in DIGEST_PARTS if stored[part] != parts[part])


_MEANING_KEY = {"prompt": "input"}
_PART_HEX_DIGITS = 16


def _meaning(
    expected_revision: int,
    input: str | Sequence[UserContent] | None,
    answers: DeferredToolResults | None,
    busy_strategy: BusyStrategy,
) -> dict[str, JsonValue]:
    return {
        "expected_revision": expected_revision,
        "input": input if input is None or isinstance(input, str) else _lean(_PROMPT, list(input)),
        "answers": None if answers is None else _lean(_ANSWERS, answers),
        "busy_strategy": busy_strategy,
    }


def same_request(stored: str, *, digest: str, legacy: str | None) -> bool:
    """Whether a run record's `stored` digest is that of the request with `digest` (and `legacy`).

    A stored digest without the version prefix was made before v2 and is compared with `legacy`; a host
    that has none (it never ran an older server on this store) sees such a record as another request.
    """
    if stored.startswith(DIGEST_VERSION):
        return stored == digest
    return legacy is not None and stored == legacy


def _lean(adapter: TypeAdapter[Any], value: object) -> JsonValue:
    full: JsonValue = adapter.dump_python(value, mode="json")
    return _without_defaults(full, adapter.dump_python(value, mode="json", exclude_defaults=True))


def _without_defaults(full: JsonValue, lean: JsonValue) -> JsonValue:
    """`full` without what `lean` (the same dump, defaults excluded) left out, but with every `kind`."""
    if isinstance(full, dict) and isinstance(lean, dict):
        return {
            key: _without_defaults(item, lean[key]) if key in lean else item
            for key, item in full.items()
            if key in lean or key == "kind"
        }
    if isinstance(full, list) and isinstance(lean, list):
        return [_without_defaults(f, v) for f, v in zip(full, lean, strict=True)]
    return lean
