"""Constants the benchmark's processes share, in a module that imports nothing heavy.

Client processes import only this, grpc and the generated code, so they start in a fraction of a
second and never load pydantic-ai.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = (
    "BARE_METHOD",
    "CHANNEL_OPTIONS",
    "DELTA",
    "PER_MESSAGE",
    "PROMPT",
    "events_of",
    "paced_pace",
    "paced_prompt",
)

PROMPT = "Compare the alpha and beta release notes and tell me which one to ship."
"""The user prompt of every `scenario` turn."""

DELTA = "abcdefgh"
"""Each text delta of the `stream` agent (8 characters, the scripted model's chunk size)."""

BARE_METHOD = "/bench.Bare/Stream"
"""The bare grpcio server's one method (`bench.bare`)."""

CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
"""Options of every benchmark channel: receive messages up to 64 MiB (grpc's default is 4 MiB)."""

PER_MESSAGE = 64
"""`StreamRunRequest.max_events_per_message` as the SDKs send it by default."""


def events_of(response: Any) -> Sequence[Any]:
    """The events of one `StreamRunResponse`, whichever form it carries them in."""
    return response.events if len(response.events) else (response.event,)


def paced_prompt(deltas: int, delay_ms: float) -> str:
    """The prompt of a `paced` turn: `deltas` text deltas, `delay_ms` apart."""
    return f"{deltas} {delay_ms:g}"


def paced_pace(prompt: str) -> tuple[int, float]:
    """`paced_prompt`'s `(deltas, delay in seconds)` back (one undelayed delta for any other prompt)."""
    parts = prompt.split()
    if len(parts) != 2:
        return 1, 0.0
    return int(parts[0]), float(parts[1]) / 1e3
