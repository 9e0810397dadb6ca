"""Threadline's harness core: portable thread state, runs and streams, deferred tools, recovery.

Pure Python on pydantic-ai; no gRPC. SPEC.md (shared) is the behaviour this package implements.
"""

from .errors import (
    DefinitionError,
    ErrorCode,
    HarnessError,
    InputError,
    RunCleanupError,
    RunError,
    StateError,
)

__all__ = [
    "DefinitionError",
    "ErrorCode",
    "HarnessError",
    "InputError",
    "RunCleanupError",
    "RunError",
    "StateError",
]
