"""Declaring children: `SubagentDefinition` and what every child run derives from its edge (CHILDREN §2).

An edge is one authored link from a parent executable to a named child executable. The parent's
`ExecutableAgent` constructor checks its edges (`check_subagents`) and appends the delegation
capability; everything a child run needs from its edge (input text, identity, usage limits) is
derived here, the same way for inline and Host-managed children.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Literal

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_ai.usage import UsageLimits

from ..context import InstanceIdentity, RunBindings
from ..errors import DefinitionError, ErrorCode
from ..json_text import JsonValue, canonical_json
from .names import is_edge_name

if TYPE_CHECKING:
    from ..agent import ExecutableAgent

__all__ = (
    "SubagentContext",
    "SubagentDefinition",
    "SubagentIdentity",
    "SubagentMode",
    "check_subagents",
    "child_identity",
    "child_input",
    "child_usage_limits",
    "limits_from_jsonable",
    "limits_to_jsonable",
)

SubagentMode = Literal["inline", "host"]
"""Who runs a child: the harness inside the parent's tool call, or the Host on a thread of its own."""

MAX_LISTED_CHILDREN = 64
"""How many children the tool instructions list."""
MAX_LISTED_DESCRIPTION = 512
"""How much of each description the tool instructions show."""


@dataclass(frozen=True, slots=True)
class SubagentContext:
    """What of the parent run the child's input carries."""

    include_task: bool = True
    """Add the parent run's own string input as `parent_task`."""
    history: Literal["none", "selected", "summary"] = "none"
    """`"selected"` adds the parent's messages as `parent_history`; `"summary"` is not supported yet."""


@dataclass(frozen=True, slots=True)
class SubagentIdentity:
    """How the child's identity derives from the parent's."""

    inherit_agent_id: bool = False
    """Keep the parent's `agent_id` claim instead of setting the child's `definition_id`."""


@dataclass(frozen=True, slots=True)
class SubagentDefinition:
    """One edge from a parent to a named child, passed as `ExecutableAgent(..., subagents=[...])`.

    Example:
        ```python
        researcher = ExecutableAgent(model, name="researcher")
        lead = ExecutableAgent(model, name="lead", subagents=[
            SubagentDefinition("researcher", "Finds facts.", researcher),
        ])
        ```
    """

    name: str
    """`^[a-z][a-z0-9_-]{0,62}$`, unique among the parent's edges; what the model names in `delegate`."""
    description: str
    """Non-blank; shown to the parent model (cut to 512 characters)."""
    agent: ExecutableAgent[Any]
    """The child executable; it needs a `definition_id` (its `name` by default)."""
    mode: SubagentMode = "inline"
    """`"inline"` (the harness runs it) or `"host"` (the Host runs it); one mode per parent."""
    context: SubagentContext = field(default_factory=SubagentContext)
    """What of the parent the child's input carries."""
    identity: SubagentIdentity = field(default_factory=SubagentIdentity)
    """How the child's identity derives."""
    usage_limits: UsageLimits | None = None
    """The edge's ceiling; a child run gets the field-wise minimum with the child's own limits."""
    bindings_hook: Callable[[RunBindings], RunBindings] | None = None
    """Inline only: may adjust the child's fresh bindings (never `instance`, `lineage`, or deferred support)."""


def _fail(code: ErrorCode, message: str, **details: JsonValue) -> DefinitionError:
    return DefinitionError(message, code=code, details=details)


def _definition_id_of(agent: object) -> str | None:
    value = getattr(agent, "definition_id", None)
    return value if isinstance(value, str) and value else None


def check_subagents(
    subagents: Sequence[SubagentDefinition],
    *,
    parent_name: str | None,
    parent_definition_id: str | None,
    executable: type[ExecutableAgent[Any]],
) -> tuple[SubagentMode | None, tuple[SubagentDefinition, ...]]:
    """Every build-time check of §2 on a parent's edges, in order; the first failure raises.

    `executable` is `ExecutableAgent`, passed by its constructor: the agent module sits on this one.

    Returns:
        The parent's one mode (`None` without edges) and the edges.

    Raises:
        DefinitionError: a `subagent_*` code.
    """
    if isinstance(subagents, str | bytes) or not isinstance(subagents, Sequence):
        raise _fail(
            ErrorCode.SUBAGENT_DEFINITION_INVALID, "subagents must be a sequence of SubagentDefinition."
        )
    edges = tuple(subagents)
    names: set[str] = set()
    modes: set[str] = set()
    for edge in edges:
        if not isinstance(edge, SubagentDefinition):
            raise _fail(ErrorCode.SUBAGENT_DEFINITION_INVALID, "Every subagent must be a SubagentDefinition.")
        if not is_edge_name(edge.name):
            raise _fail(
                ErrorCode.SUBAGENT_NAME_INVALID,
                "A subagent name must match ^[a-z][a-z0-9_-]{0,62}$.",
                name=edge.name if isinstance(edge.name, str) else repr(edge.name),
            )
        if edge.name in names:
            raise _fail(
                ErrorCode.SUBAGENT_NAME_DUPLICATE,
                f"Subagent {edge.name!r} is declared twice.",
                name=edge.name,
            )
        names.add(edge.name)
        if not isinstance(edge.description, str) or not edge.description.strip():
            raise _fail(
                ErrorCode.SUBAGENT_DESCRIPTION_INVALID,
                f"Subagent {edge.name!r} needs a description.",
                name=edge.name,
            )
        if not isinstance(edge.agent, executable):
            raise _fail(
                ErrorCode.SUBAGENT_DEFINITION_INVALID,
                f"Subagent {edge.name!r} needs an ExecutableAgent.",
                name=edge.name,
            )
        if _definition_id_of(edge.agent) is None:
            raise _fail(
                ErrorCode.SUBAGENT_DEFINITION_INVALID,
                f"The agent of subagent {edge.name!r} has neither a name nor a definition_id.",
                name=edge.name,
            )
        if edge.mode not in ("inline", "host"):
            raise _fail(
                ErrorCode.SUBAGENT_DEFINITION_INVALID,
                f"Subagent {edge.name!r} has an unknown mode.",
                name=edge.name,
            )
        if edge.mode == "host" and (not parent_name or not edge.agent.name):
            raise _fail(
                ErrorCode.SUBAGENT_DEFINITION_INVALID,
                f"A host-mode subagent ({edge.name!r}) needs a name on the parent and on the child agent.",
                name=edge.name,
            )
        _check_context(edge)
        if (
            not isinstance(edge.identity, SubagentIdentity)
            or type(edge.identity.inherit_agent_id) is not bool
        ):
            raise _fail(
                ErrorCode.SUBAGENT_IDENTITY_INVALID,
                f"Subagent {edge.name!r} has an invalid identity.",
                name=edge.name,
            )
        if edge.usage_limits is not None and not isinstance(edge.usage_limits, UsageLimits):
            raise _fail(
                ErrorCode.SUBAGENT_LIMITS_INVALID,
                f"Subagent {edge.name!r} limits must be UsageLimits.",
                name=edge.name,
            )
        if edge.bindings_hook is not None and (edge.mode != "inline" or not callable(edge.bindings_hook)):
            raise _fail(
                ErrorCode.SUBAGENT_BINDING_INVALID,
                f"The bindings_hook of subagent {edge.name!r} must be a callable, on an inline edge.",
                name=edge.name,
            )
        modes.add(edge.mode)
    if len(modes) > 1:
        raise _fail(ErrorCode.SUBAGENT_MODE_CONFLICT, "A parent uses one mode for all its subagents.")
    if parent_definition_id is not None:
        _check_acyclic(edges, parent_definition_id)
    mode: SubagentMode | None = "host" if "host" in modes else ("inline" if modes else None)
    return mode, edges


def _check_context(edge: SubagentDefinition) -> None:
    context = edge.context
    if (
        not isinstance(context, SubagentContext)
        or type(context.include_task) is not bool
        or context.history not in ("none", "selected", "summary")
    ):
        raise _fail(
            ErrorCode.SUBAGENT_CONTEXT_INVALID,
            f"Subagent {edge.name!r} has an invalid context.",
            name=edge.name,
        )
    if context.history == "summary":
        raise _fail(
            ErrorCode.SUBAGENT_CONTEXT_UNSUPPORTED,
            "history='summary' needs a summariser this harness does not have.",
            name=edge.name,
        )
    if edge.mode == "host" and context.history != "none":
        raise _fail(
            ErrorCode.SUBAGENT_CONTEXT_UNSUPPORTED,
            "A host-mode subagent accepts only history='none' (its request travels in deferred metadata).",
            name=edge.name,
        )


def _check_acyclic(edges: Sequence[SubagentDefinition], root: str) -> None:
    """The definition graph below the parent must never lead back to the parent's definition ID."""
    seen: set[int] = set()
    stack = [edge.agent for edge in edges]
    while stack:
        agent = stack.pop()
        if id(agent) in seen:
            continue
        seen.add(id(agent))
        if _definition_id_of(agent) == root:
            raise _fail(
                ErrorCode.SUBAGENT_CYCLE, f"Subagent definitions lead back to {root!r}.", definition_id=root
            )
        stack.extend(edge.agent for edge in getattr(agent, "subagents", ()))


# --- what a child run derives from its edge ---------------------------------------------------------


def child_input(
    prompt: str,
    *,
    context: SubagentContext,
    parent_input: object,
    parent_messages: Sequence[ModelMessage] = (),
) -> str:
    """The child's user prompt: canonical JSON of `delegated_task`, `parent_task`, `parent_history` (§2).

    Args:
        prompt: The model's prompt.
        context: The edge's context rules.
        parent_input: The parent run's own input (what its `run()`/`stream()` got); only a non-empty
            `str` becomes `parent_task`.
        parent_messages: The parent's current messages, for `history="selected"`.
    """
    body: dict[str, JsonValue] = {"delegated_task": prompt}
    if context.include_task and isinstance(parent_input, str) and parent_input:
        body["parent_task"] = parent_input
    if context.history == "selected":
        body["parent_history"] = ModelMessagesTypeAdapter.dump_json(list(parent_messages)).decode()
    return canonical_json(body)


def child_identity(
    parent: InstanceIdentity, edge: SubagentDefinition, *, agent_instance_id: str
) -> InstanceIdentity:
    """Same issuer and subject, a new instance, the parent's claims with the child's `agent_id` (§2).

    With `inherit_agent_id` the parent's claims are copied unchanged.
    """
    claims: dict[str, JsonValue] = dict(parent.claims or {})
    if not edge.identity.inherit_agent_id:
        claims["agent_id"] = edge.agent.definition_id
    return InstanceIdentity(parent.issuer, parent.subject, agent_instance_id, claims=claims)


_LIMIT_FIELDS = tuple(
    f.name for f in dataclasses.fields(UsageLimits) if f.name != "count_tokens_before_request"
)


def child_usage_limits(*sources: UsageLimits | None) -> UsageLimits | None:
    """The field-by-field minimum of the given limits (§2); `None` sources are left out.

    A `None` field sets no bound; `count_tokens_before_request` is true if any source says so. Each
    `UsageLimits` source keeps the native `request_limit` default of 50 unless it sets its own.

    Returns:
        `None` when every source is `None`.
    """
    given = [source for source in sources if source is not None]
    if not given:
        return None
    values: dict[str, Any] = {}
    for name in _LIMIT_FIELDS:
        bounds = [getattr(source, name) for source in given if getattr(source, name) is not None]
        values[name] = min(bounds) if bounds else None
    values["count_tokens_before_request"] = any(source.count_tokens_before_request for source in given)
    return UsageLimits(**values)


def limits_to_jsonable(limits: UsageLimits | None) -> dict[str, JsonValue] | None:
    """The native limit fields as JSON (`cost_limit` as a decimal string), or `None`."""
    if limits is None:
        return None
    out: dict[str, JsonValue] = {}
    for name in (*_LIMIT_FIELDS, "count_tokens_before_request"):
        value = getattr(limits, name)
        out[name] = str(value) if isinstance(value, Decimal) else value
    return out


def limits_from_jsonable(data: object) -> UsageLimits | None:
    """`limits_to_jsonable`'s inverse; unknown keys are ignored.

    Raises:
        ValueError: `data` is not an object of limit fields.
    """
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ValueError("usage limits must be a JSON object")
    values = {
        key: value for key, value in data.items() if key in (*_LIMIT_FIELDS, "count_tokens_before_request")
    }
    if isinstance(values.get("cost_limit"), str):
        values["cost_limit"] = Decimal(values["cost_limit"])
    return UsageLimits(**values)
