"""`ctx.deps.state`: one run's capability namespaces (SPEC §2.8).

A store is seeded from the previous state's `AgentContextStateSnapshot` and lives for one run. Each
namespace holds a `CapabilityState(version, data)`; a capability reads it with its own model type and an
exact version, and writes a model back. The store keeps namespace order the way states do (SPEC §2.1.4):
restored namespaces first, in their order, then new ones in write order; rewriting keeps a namespace's
place (a `dict` does exactly that). Unknown namespaces are never touched, so they re-export unchanged.

A `write` is atomic: between its check and its replacement there is no `await`, so on one event loop
no other tool call can run in between, and concurrent writers land in the order they called. `read`
followed by `write` is not atomic across concurrent tool calls; a capability that needs that
serializes itself. (No lock: it would protect nothing, and tie the core to asyncio.)
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError

from .errors import ErrorCode, StateError
from .json_text import NotFiniteJson, check_finite_json
from .state import AgentContextStateSnapshot, CapabilityState

__all__ = ("CapabilityStateStore", "version_unsupported")

ModelT = TypeVar("ModelT", bound=BaseModel)


def version_unsupported(capability_id: str, *, expected: str, actual: str) -> StateError:
    """`capability_state_version_unsupported`: a namespace stored at a version its reader does not read."""
    return StateError(
        f"Capability state of {capability_id!r} has version {actual!r}; its reader reads version {expected!r}.",
        code=ErrorCode.CAPABILITY_STATE_VERSION_UNSUPPORTED,
        details={"capability_id": capability_id, "expected_version": expected, "actual_version": actual},
    )


def _check_id(capability_id: object) -> str:
    if not isinstance(capability_id, str) or not capability_id.strip():
        raise StateError(
            "Capability ID must be a non-blank string.",
            code=ErrorCode.CAPABILITY_STATE_ID_INVALID,
        )
    return capability_id


def _check_version(capability_id: str, version: object) -> str:
    if not isinstance(version, str) or not version.strip():
        raise StateError(
            f"Capability state version for {capability_id!r} must be a non-blank string.",
            code=ErrorCode.CAPABILITY_STATE_VERSION_INVALID,
            details={"capability_id": capability_id},
        )
    return version


def _invalid(capability_id: str, why: str) -> StateError:
    return StateError(
        f"Capability state of {capability_id!r} is invalid: {why}",
        code=ErrorCode.CAPABILITY_STATE_INVALID,
        details={"capability_id": capability_id},
    )


class CapabilityStateStore:
    """Versioned capability namespaces for one run, reachable from tools as `ctx.deps.state`.

    Usage:
        current = await ctx.deps.state.read("acme.counter", CounterState, version="1")
        await ctx.deps.state.write("acme.counter", CounterState(value=1), version="1")
        snapshot = store.snapshot()  # what the run exports
    """

    def __init__(self, snapshot: AgentContextStateSnapshot | None = None) -> None:
        """Seed the store.

        Args:
            snapshot: The previous state's namespaces; `None` starts empty.
        """
        self._entries: dict[str, CapabilityState] = snapshot.entries if snapshot is not None else {}
        # Snapshots are immutable, so the seed itself is the current snapshot until something changes.
        self._snapshot: AgentContextStateSnapshot | None = snapshot

    async def read(self, capability_id: str, state_type: type[ModelT], *, version: str) -> ModelT | None:
        """Read a namespace as `state_type`, if it exists.

        Args:
            capability_id: The namespace, e.g. `"acme.counter"`.
            state_type: The pydantic model the owning capability stores; validated in lax mode.
            version: The exact version the caller understands (no migration).

        Returns:
            A new `state_type` instance on every call, or `None` when the namespace is absent.

        Raises:
            StateError: `capability_state_id_invalid` (blank ID), `capability_state_version_invalid`
                (blank version), `capability_state_version_unsupported` (stored version differs; details
                `capability_id`, `expected_version`, `actual_version`), or `capability_state_invalid`
                (the stored data does not validate as `state_type`).
        """
        capability_id = _check_id(capability_id)
        version = _check_version(capability_id, version)
        entry = self._entries.get(capability_id)
        if entry is None:
            return None
        if entry.version != version:
            raise version_unsupported(capability_id, expected=version, actual=entry.version)
        if not (isinstance(state_type, type) and issubclass(state_type, BaseModel)):
            raise _invalid(capability_id, "the state type must be a pydantic model class.")
        try:
            return state_type.model_validate(entry.data)
        except ValidationError as exc:
            raise _invalid(
                capability_id, f"{exc.error_count()} validation error(s) as {state_type.__name__}."
            ) from exc

    async def write(self, capability_id: str, value: BaseModel, *, version: str) -> None:
        """Replace a namespace with `value`, stored as `value.model_dump(mode="json")`.

        Writing an entry equal to the stored one changes nothing (the snapshot is not rebuilt).

        Args:
            capability_id: The namespace.
            value: A pydantic model instance whose JSON form is finite JSON.
            version: The version the payload is written in.

        Raises:
            StateError: `capability_state_id_invalid`, `capability_state_version_invalid`, or
                `capability_state_invalid` (not a `BaseModel`, or its JSON form is not finite JSON).
        """
        capability_id = _check_id(capability_id)
        version = _check_version(capability_id, version)
        if not isinstance(value, BaseModel):
            raise _invalid(capability_id, f"expected a pydantic model instance, not {type(value).__name__}.")
        try:
            # `model_dump(mode="json")` keeps NaN/±inf as floats, so the finite check below sees them.
            data = check_finite_json(value.model_dump(mode="json"))
            entry = CapabilityState(version=version, data=data)
        except (NotFiniteJson, ValidationError, ValueError, TypeError) as exc:
            raise _invalid(capability_id, str(exc)) from exc
        # No `await` from here on: the replacement is one step (module docstring).
        if self._entries.get(capability_id) == entry:
            return
        self._entries[capability_id] = entry
        self._snapshot = None

    def snapshot(self) -> AgentContextStateSnapshot:
        """Every namespace as it stands: restored ones first, in order, then new ones in write order.

        The snapshot is immutable (its reads are detached), so it is rebuilt only after a change.
        """
        if self._snapshot is None:
            self._snapshot = AgentContextStateSnapshot(entries=self._entries)
        return self._snapshot
