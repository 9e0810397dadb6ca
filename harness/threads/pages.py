"""Page tokens of `ListThreads` and `ListCheckpoints` (THREADS §3, AIP-158): opaque and tamper-evident.

A token is base64url, unpadded, of a 16-byte tag then the position's JSON (the last item's sort key).
The tag is HMAC-SHA256, cut to 16 bytes, over the position and the listing it pages: the RPC, and the
thread (ListCheckpoints) or the label filter and status (ListThreads); `page_size` may change between
pages. The key is the store's (`store_settings`, made once by migration 0002), so every replica of one
database accepts the others' tokens. A token altered in any byte, made by another store, for another
listing or in another format is refused before anything in it is read: `input_invalid` at `page_token`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
from collections.abc import Mapping
from typing import Any

from ..errors import ErrorCode, InputError
from ..json_text import JsonValue
from .records import ThreadStatus

__all__ = ("MAX_TOKEN_CHARS", "PageTokens")

MAX_TOKEN_CHARS = 1024
"""Longer than any token the store makes (a thread ID has at most 256 characters); checked before decoding."""
_TAG_BYTES = 16
_FORMAT = b"threadline.page_token.v1"
"""Part of every tag: a token of another format fails its tag rather than being misread."""
_INT64 = (-(2**63), 2**63 - 1)
_MAX_TEXT = 256

_Fields = Mapping[str, type]
_THREADS: _Fields = {"t": float, "id": str}
_CHECKPOINTS: _Fields = {"before": int}


class PageTokens:
    """Seals and opens the page tokens of one store's listings with the store's key."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("a page token key has at least 16 bytes")
        self._key = key

    def threads_token(
        self, after: tuple[float, str], *, labels: Mapping[str, str], status: ThreadStatus | None
    ) -> str:
        """The token of the `ListThreads` page after the thread at `after` (update time, thread ID)."""
        return self._seal(_threads_listing(labels, status), {"t": after[0], "id": after[1]})

    def threads_after(
        self, token: str, *, labels: Mapping[str, str], status: ThreadStatus | None
    ) -> tuple[float, str]:
        """Where the `ListThreads` page of `token` starts: it must be this listing's (same filter and status).

        Raises:
            InputError: `input_invalid` at `page_token`.
        """
        position = self._open(token, _threads_listing(labels, status), _THREADS)
        return position["t"], position["id"]

    def checkpoints_token(self, before: int, *, thread_id: str) -> str:
        """The token of the `ListCheckpoints` page of `thread_id` below revision `before`."""
        return self._seal(["ListCheckpoints", thread_id], {"before": before})

    def checkpoints_before(self, token: str, *, thread_id: str) -> int:
        """The revision the `ListCheckpoints` page of `token` lists below: it must be `thread_id`'s.

        Raises:
            InputError: `input_invalid` at `page_token`.
        """
        return int(self._open(token, ["ListCheckpoints", thread_id], _CHECKPOINTS)["before"])

    def _tag(self, listing: JsonValue, body: bytes) -> bytes:
        # JSON escapes every control character, so NUL separates the parts unambiguously.
        scope = json.dumps(listing, separators=(",", ":"), sort_keys=True).encode()
        message = b"\0".join((_FORMAT, scope, body))
        return hmac.new(self._key, message, hashlib.sha256).digest()[:_TAG_BYTES]

    def _seal(self, listing: JsonValue, position: Mapping[str, JsonValue]) -> str:
        body = json.dumps(position, separators=(",", ":"), sort_keys=True).encode()
        return base64.urlsafe_b64encode(self._tag(listing, body) + body).decode().rstrip("=")

    def _open(self, token: str, listing: JsonValue, fields: _Fields) -> dict[str, Any]:
        """The one strict decoder: bounded, base64url, the tag checked, then each field's type."""
        if len(token) > MAX_TOKEN_CHARS:
            raise _refused()
        try:
            raw = base64.b64decode(
                token.encode("ascii") + b"=" * (-len(token) % 4), altchars=b"-_", validate=True
            )
        except (UnicodeEncodeError, binascii.Error):
            raise _refused() from None
        tag, body = raw[:_TAG_BYTES], raw[_TAG_BYTES:]
        if len(tag) < _TAG_BYTES or not hmac.compare_digest(tag, self._tag(listing, body)):
            raise _refused()
        # Ours from here on (the tag holds); checked all the same, so no key mistake reaches a query.
        try:
            position = json.loads(body, parse_constant=_no_constant)
        except ValueError:
            raise _refused() from None
        if not isinstance(position, dict) or set(position) != set(fields):
            raise _refused()
        for name, kind in fields.items():
            if not _fits(position[name], kind):
                raise _refused()
        return position


def _threads_listing(labels: Mapping[str, str], status: ThreadStatus | None) -> JsonValue:
    return ["ListThreads", {"labels": dict(labels), "status": status}]


def _fits(value: object, kind: type) -> bool:
    if kind is float:
        return isinstance(value, float) and math.isfinite(value)
    if kind is int:
        return type(value) is int and _INT64[0] <= value <= _INT64[1]
    return isinstance(value, str) and len(value) <= _MAX_TEXT


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a position")


def _refused() -> InputError:
    return InputError(
        "page_token is not one this server returned for this listing.",
        code=ErrorCode.INPUT_INVALID,
        details={"field": "page_token"},
    )
