"""The host's trace context, passed on in every call's metadata so the server's spans join its trace.

With the OpenTelemetry API installed (the `otel` extra), each call carries what the global
propagator injects from the context current when the call is made: by default W3C `traceparent`
and `tracestate` (when a span is current) and `baggage` (when there is any). Without the API, or
with no span current, nothing is added. The SDK makes no spans of its own: propagation only, one
dict per call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

__all__ = ("Metadata", "call_metadata")

Metadata = tuple[tuple[str, str], ...]
"""Request metadata as grpclib takes it: (key, value) pairs."""


def _injector() -> Callable[[dict[str, str]], None] | None:
    try:
        from opentelemetry.propagate import inject
    except ImportError:  # the host has no OpenTelemetry: nothing to pass on
        return None
    return inject


_INJECT: Final = _injector()


def call_metadata(base: Metadata) -> Metadata | None:
    """`base` (the client's own, e.g. its token) plus the current trace context; `None` if empty."""
    if _INJECT is None:
        return base or None
    carrier: dict[str, str] = {}
    _INJECT(carrier)
    # gRPC metadata keys travel as HTTP/2 header names, which are lowercase.
    return (*base, *((key.lower(), value) for key, value in carrier.items())) or None
