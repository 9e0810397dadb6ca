"""The agents a server runs: the embedded demo, `--agent NAME=module:factory`, and `--model`.

Agents are built once at start, so a broken factory or a missing provider extra stops the server
before it listens, with a message naming what to fix, instead of failing the first run.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import UserError
from pydantic_ai.models import Model, infer_model
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ExternalToolset, FunctionToolset

from harness import DefinitionError, ExecutableAgent
from harness.children import HostDelegationCapability
from harness.tools import is_recovery_retryable

from .config import ConfigError
from .demo import DEMO_AGENT_NAME, demo_agent, demo_children

__all__ = (
    "AgentRegistry",
    "ToolCategory",
    "ToolDescription",
    "build_model",
    "build_registry",
    "describe_tool",
    "load_factory",
)

ToolCategory = Literal["plain", "requires_approval", "external", "recovery_retryable"]


@dataclass(frozen=True, slots=True)
class ToolDescription:
    """One of an agent's own tools, as `GetServerInfo` lists it."""

    name: str
    category: ToolCategory
    description: str
    recovery_retryable: bool


def describe_tool(tool_def: ToolDefinition) -> ToolDescription:
    """How `GetServerInfo` lists one tool: its category from its kind and recovery metadata."""
    retryable = is_recovery_retryable(tool_def)
    category: ToolCategory
    if tool_def.kind == "unapproved":
        category = "requires_approval"
    elif tool_def.kind == "external":
        category = "external"
    elif retryable:
        category = "recovery_retryable"
    else:
        category = "plain"
    return ToolDescription(tool_def.name, category, tool_def.description or "", retryable)


def _tool_defs(capability: AbstractCapability[Any]) -> Iterator[ToolDefinition]:
    toolset = capability.get_toolset()
    if toolset is None:
        return
    leaves: list[AbstractToolset[Any]] = []
    if isinstance(toolset, AbstractToolset):
        toolset.apply(leaves.append)
    for leaf in leaves:
        if isinstance(leaf, FunctionToolset):
            for tool in leaf.tools.values():
                yield tool.tool_def
        elif isinstance(leaf, ExternalToolset):
            yield from leaf.tool_defs
        # Dynamic toolsets (MCP servers, prepared per run) have no static list; they are not listed.


def describe_tools(agent: ExecutableAgent[Any]) -> tuple[ToolDescription, ...]:
    """The agent's statically declared tools, in declaration order.

    Host-mode child tools are function tools that always suspend the run, so they are listed as
    external (CHILDREN §5.5).
    """
    return tuple(
        dataclasses.replace(describe_tool(d), category="external")
        if isinstance(cap, HostDelegationCapability)
        else describe_tool(d)
        for cap in agent.capabilities
        for d in _tool_defs(cap)
    )


def serves_by_name(agents: Mapping[str, ExecutableAgent[Any]], agent: ExecutableAgent[Any]) -> bool:
    """Whether `agents` serves `agent`'s definition under its own `name` (how child requests name it)."""
    match = agents.get(agent.name) if agent.name is not None else None
    return match is not None and match.definition_id == agent.definition_id


def check_children_served(agents: Mapping[str, ExecutableAgent[Any]]) -> None:
    """A host-mode parent and each of its children must be served under their own `name` (CHILDREN §5.5):
    child requests name agents that way, and the host runs the child by that name.

    Raises:
        ConfigError: naming the agent that is not served so.
    """
    for served, agent in agents.items():
        if not any(edge.mode == "host" for edge in agent.subagents):
            continue
        for needed in (agent, *(edge.agent for edge in agent.subagents)):
            if not serves_by_name(agents, needed):
                raise ConfigError(
                    f"child_agent_unknown: agent {served!r} has host-mode children, so it and each child "
                    f"must be served under its own name; {needed.name!r} is not (add --agent "
                    f"{needed.name}=module:factory)."
                )


class AgentRegistry:
    """The named agents of one server, in the order `GetServerInfo` lists them."""

    def __init__(self, agents: Mapping[str, ExecutableAgent[Any]], *, default: str) -> None:
        if default not in agents:
            raise ConfigError(f"The default agent {default[:200]!r} is not served.")
        check_children_served(agents)
        self._agents = dict(agents)
        self._tools = {name: describe_tools(agent) for name, agent in self._agents.items()}
        self.default = default
        """The agent a run with an empty `agent` gets."""

    def __iter__(self) -> Iterator[str]:
        return iter(self._agents)

    def serves_by_name(self, agent: ExecutableAgent[Any]) -> bool:
        """Whether this server serves `agent`'s definition under its own `name`."""
        return serves_by_name(self._agents, agent)

    def get(self, name: str) -> ExecutableAgent[Any] | None:
        """The agent called `name` (empty = the default), or `None`."""
        return self._agents.get(name or self.default)

    def tools(self, name: str) -> tuple[ToolDescription, ...]:
        """The agent's own tools (empty = the default agent's)."""
        return self._tools.get(name or self.default, ())


# pydantic-ai provider prefixes -> the pydantic-ai-slim extra that brings the provider's SDK.
_EXTRAS = {
    "openai": "openai",
    "openai-chat": "openai",
    "openai-responses": "openai",
    "azure": "openai",
    "deepseek": "openai",
    "openrouter": "openai",
    "ollama": "openai",
    "anthropic": "anthropic",
    "google-gla": "google",
    "google-vertex": "google",
    "gemini": "google",
    "groq": "groq",
    "mistral": "mistral",
    "cohere": "cohere",
    "bedrock": "bedrock",
    "huggingface": "huggingface",
}


def build_model(spec: str) -> Model:
    """Build `--model provider:model` now, so a missing extra or key fails at start.

    Raises:
        ConfigError: The provider's extra is not installed (the message names it), a key is
            missing, or the name is unknown.
    """
    provider = spec.split(":", 1)[0]
    try:
        return infer_model(spec)
    except ImportError as error:
        extra = _EXTRAS.get(provider, provider)
        raise ConfigError(
            f"--model {spec[:200]}: the provider {provider[:200]!r} needs the pydantic-ai-slim extra {extra!r}; "
            f"install it with: pip install 'pydantic-ai-slim[{extra}]'"
        ) from error
    except UserError as error:
        raise ConfigError(f"--model {spec[:200]}: {str(error)[:300]}") from error


def load_factory(spec: str, model: Model | None) -> tuple[str, ExecutableAgent[Any]]:
    """Build one `--agent NAME=module:factory`.

    The factory is called with the `--model` model as its one argument when `--model` is given
    (and the factory takes an argument), else with none; it returns an `ExecutableAgent`. Whatever
    goes wrong in the user's code (its import, the call) is a `ConfigError` naming the spec, so a
    bad factory stops the start with a message, not a traceback.

    Raises:
        ConfigError: The spec is malformed, the import fails, the target is not callable, the call
            fails, or the factory returns something else (`field`: `agents.NAME`, for the file's line).
    """
    name, sep, target = spec.partition("=")
    module_name, colon, attr = target.partition(":")
    flag = f"--agent {spec[:200]!r}"  # as messages echo it: bounded
    if not sep or not colon or not name.strip() or not module_name or not attr:
        raise ConfigError(f"{flag}: expected NAME=module:factory, e.g. support=myapp.agents:build.")
    where = f"agents.{name.strip()}"
    try:
        factory: object = getattr(importlib.import_module(module_name), attr)
    except Exception as error:  # ImportError, AttributeError, or whatever the module raises
        raise ConfigError(f"{flag}: cannot import {target[:200]}: {_told(error)}", field=where) from None
    if not callable(factory):
        raise ConfigError(
            f"{flag}: {target[:200]} is a {type(factory).__name__}, not a factory to call.", field=where
        )
    try:
        agent = factory(model) if model is not None and _takes_an_argument(factory) else factory()
    except DefinitionError as error:  # e.g. a child edge the constructor refused
        raise ConfigError(f"{flag}: {error.code.value}: {error}", field=where) from None
    except Exception as error:  # e.g. json:loads, which needs an argument: not an agent factory
        raise ConfigError(f"{flag}: calling {target[:200]}() failed: {_told(error)}", field=where) from None
    if not isinstance(agent, ExecutableAgent):
        raise ConfigError(
            f"{flag}: the factory returned {type(agent).__name__}, not an ExecutableAgent.",
            field=where,
        )
    return name.strip(), agent


def _takes_an_argument(factory: Callable[..., object]) -> bool:
    try:
        return bool(inspect.signature(factory).parameters)
    except (TypeError, ValueError):  # no signature to read (some builtins): call it without one
        return False


def _told(error: Exception) -> str:
    """An exception of the user's code as a message shows it: its type and its text, bounded."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text[:300]}" if text else type(error).__name__


def build_registry(
    agent_specs: Sequence[str] = (), *, model: str | None = None, default: str | None = None
) -> AgentRegistry:
    """The served agents: the demo as "default" (unless replaced), then each `--agent` in order.

    Args:
        agent_specs: `NAME=module:factory` strings.
        model: `provider:model` for the user's agents and the demo's tools; `None` = the demo's
            scripted model, and each factory's own choice.
        default: The default agent's name; `None` = the first `--agent`, else "default".
    """
    built = build_model(model) if model is not None else None
    agents: dict[str, ExecutableAgent[Any]] = {DEMO_AGENT_NAME: demo_agent(built), **demo_children(built)}
    for spec in agent_specs:
        name, agent = load_factory(spec, built)
        agents[name] = agent
    first = load_name(agent_specs[0]) if agent_specs else DEMO_AGENT_NAME
    return AgentRegistry(agents, default=default or first)


def load_name(spec: str) -> str:
    """The NAME of a `NAME=module:factory` spec."""
    return spec.partition("=")[0].strip()
