"""The inline-children registry in the parent's state: namespace `a13n.subagents`, version `"2"` (CHILDREN §3.4, §3.5).

The format is the reference library's, so parent states with inline children move between the two
implementations::

    {"children": {"researcher-de97": {"child_definition_id": "researcher", "child_instance_id": "researcher-de97",
      "child_thread_id": "thread_<32 hex>", "refs": [], "state": {<HarnessState>}, "subagent_name": "researcher"}}}

A parent with inline children validates the registry of its `previous_state` when the run is constructed
(`check_registry`); `fork()` re-keys it through the fork hook registered here (`fork_registry`); a
continuation moves a record's stored state to the record's thread lazily (`load_child_state`).
"""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

from ..capability_state import version_unsupported
from ..errors import ErrorCode, StateError
from ..state import CapabilityState, HarnessState, StoredRef, register_fork_hook
from .names import inline_child_thread_id

__all__ = (
    "REGISTRY_ID",
    "REGISTRY_VERSION",
    "ChildRecord",
    "Registry",
    "check_registry",
    "fork_registry",
    "load_child_state",
    "retained_state",
)

REGISTRY_ID = "a13n.subagents"
"""The capability namespace of the inline registry."""
REGISTRY_VERSION = "2"
"""The only registry version (the reference keeps no reader for older ones)."""
USAGE_NAMESPACE = "a13n.usage"
"""Removed from a retained child state: a resumed child starts its accounting fresh."""

_CHILD_ID = re.compile(r"^([a-z][a-z0-9_-]{0,62})-[0-9a-f]{4}$")
_STORED_REF_KEYS = frozenset({"key", "digest", "size"})


class ChildRecord(BaseModel):
    """One retained inline child: exactly these six keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    child_definition_id: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    child_instance_id: Annotated[str, StringConstraints(min_length=7, max_length=68)]
    child_thread_id: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    refs: list[StoredRef]
    state: dict[str, Any]
    """The child's full `HarnessState` JSON object, or a `StoredRef` object."""
    subagent_name: Annotated[str, StringConstraints(min_length=1, max_length=63)]

    @field_validator("state")
    @classmethod
    def _state_or_ref(cls, value: dict[str, Any]) -> dict[str, Any]:
        if set(value) == _STORED_REF_KEYS:
            StoredRef.model_validate(value)
        else:
            HarnessState.model_validate(value)
        return value

    @model_validator(mode="after")
    def _id_names_edge(self) -> ChildRecord:
        match = _CHILD_ID.fullmatch(self.child_instance_id)
        if match is None or match.group(1) != self.subagent_name:
            raise ValueError("child_instance_id must be <subagent_name>-<4 hex>")
        return self

    @property
    def stored_ref(self) -> bool:
        """Whether the state lives in a Host state store."""
        return set(self.state) == _STORED_REF_KEYS


class Registry(BaseModel):
    """The namespace's payload: child ID → record."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    children: dict[str, ChildRecord]

    @model_validator(mode="after")
    def _keys_and_threads(self) -> Registry:
        threads: set[str] = set()
        for key, record in self.children.items():
            if key != record.child_instance_id:
                raise ValueError("every key must equal its record's child_instance_id")
            if record.child_thread_id in threads:
                raise ValueError("two records share a child_thread_id")
            threads.add(record.child_thread_id)
        return self


def _invalid(why: str) -> StateError:
    return StateError(
        f"Capability state of {REGISTRY_ID!r} is invalid: {why}",
        code=ErrorCode.CAPABILITY_STATE_INVALID,
        details={"capability_id": REGISTRY_ID},
    )


def _parse(entry: CapabilityState) -> Registry:
    if entry.version != REGISTRY_VERSION:
        raise version_unsupported(REGISTRY_ID, expected=REGISTRY_VERSION, actual=entry.version)
    try:
        return Registry.model_validate(entry.data)
    except ValidationError as exc:
        raise _invalid(f"{exc.error_count()} validation error(s).") from None


def check_registry(state: HarnessState) -> None:
    """Validate `state`'s registry at run construction (a parent with inline children only).

    Raises:
        StateError: `capability_state_version_unsupported`, `capability_state_invalid`, or
            `state_store_missing` for a record kept in a state store (this harness has none).
    """
    entry = state.agent_context_state.get(REGISTRY_ID)
    if entry is None:
        return
    registry = _parse(entry)
    for record in registry.children.values():
        if record.stored_ref or record.refs:
            raise StateError(
                f"Inline child {record.child_instance_id!r} is kept in a host state store, which this harness does not have.",
                code=ErrorCode.STATE_STORE_MISSING,
                details={"capability_id": REGISTRY_ID},
            )


def fork_registry(entry: CapabilityState, thread_id: str) -> CapabilityState:
    """The registry of a branch `thread_id`: each record's `child_thread_id` re-derived, states unchanged.

    A pure function of (entry, thread_id), so a retried fork gives byte-identical output.

    Raises:
        StateError: the registry is malformed or of another version (fork fails closed).
    """
    registry = _parse(entry)
    children = {
        key: record.model_copy(update={"child_thread_id": inline_child_thread_id(thread_id, key)})
        for key, record in registry.children.items()
    }
    return CapabilityState(version=REGISTRY_VERSION, data=Registry(children=children).model_dump(mode="json"))


def load_child_state(record: ChildRecord) -> HarnessState:
    """The record's state on the record's thread: forked there first when a parent fork moved the record."""
    state = HarnessState.model_validate(record.state)
    if state.thread_id != record.child_thread_id:
        state = state.fork(thread_id=record.child_thread_id)
    return state


def retained_state(state: HarnessState) -> dict[str, Any]:
    """What a record keeps of a child's terminal state: no `a13n.usage`, no Environment state."""
    data: dict[str, Any] = json.loads(state.model_dump_json())
    data["agent_context_state"]["entries"].pop(USAGE_NAMESPACE, None)
    data["environment_states"] = {}
    return data


register_fork_hook(REGISTRY_ID, fork_registry)
