"""A run's observation of its mounts: references, watchers, close (ENVIRONMENT §5, §8).

References (`proc-<tag>-<n>`) name a (mount, command) pair inside one run only: a new run draws a new
tag and starts an empty table, so a reference copied from history resolves to nothing (§5.4). Closing
the run cancels its watchers, drops its table and detaches its mounts; it kills nothing (§8).
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ErrorCode, RunError
from ..own_loop import at_home
from ..state import EnvironmentState
from .adapter import EnvironmentMount
from .config import MOUNT_NAME
from .errors import EnvironmentToolError

if TYPE_CHECKING:
    from .backend import Command

__all__ = ("EnvironmentView", "MountView", "RunEnvironment", "check_mounts")

MAX_REFERENCES = 1000
_REFERENCE = re.compile(r"^proc-([0-9a-f]{8})-([1-9][0-9]{0,5})$")


@dataclass(frozen=True, slots=True)
class MountView:
    """What a tool may know of a mount: its name, actions, whether commands can outlive a call."""

    name: str
    actions: frozenset[str]
    process_capable: bool


@dataclass(frozen=True, slots=True)
class EnvironmentView:
    """`AgentContext.environment`: the run's mounts (read-only) and its default mount."""

    mounts: tuple[MountView, ...]
    default_mount: str | None


def _invalid(reason: str, message: str, mount: str | None = None) -> RunError:
    details: dict[str, Any] = {"reason": reason}
    if mount is not None:
        details["mount"] = mount
    return RunError(message, code=ErrorCode.RUN_BINDINGS_INVALID, details=details)


def check_mounts(mounts: Sequence[object], default_mount: str | None) -> tuple[EnvironmentMount, ...]:
    """The binding checks of §3.3, at run construction (`RunEnvironment` claims the adapters).

    Raises:
        RunError: `run_bindings_invalid` with `reason` `not_a_mount`, `name`, `default_unknown` or
            `adapter_reused`.
    """
    checked: list[EnvironmentMount] = []
    names: set[str] = set()
    for mount in mounts:
        if not isinstance(mount, EnvironmentMount):
            raise _invalid("not_a_mount", f"{type(mount).__name__} is not an EnvironmentMount.")
        if not MOUNT_NAME.fullmatch(mount.name) or mount.name in names:
            raise _invalid(
                "name", f"Mount name {mount.name[:80]!r} is invalid or used twice.", mount.name[:80]
            )
        names.add(mount.name)
        checked.append(mount)
    if default_mount is not None and default_mount not in names:
        raise _invalid("default_unknown", f"The default mount {default_mount[:80]!r} is not bound.")
    for mount in checked:
        mount.check_unbound()
    return tuple(checked)


class RunEnvironment:
    """The run-local side of a run's mounts; the stream owns it and closes it."""

    def __init__(
        self,
        mounts: Sequence[EnvironmentMount],
        default_mount: str | None,
        emit: Callable[[Literal["state", "tool"], dict[str, Any]], None],
    ) -> None:
        self.mounts = check_mounts(mounts, default_mount)
        for mount in self.mounts:
            mount.bind()
        self.default_mount = default_mount or (self.mounts[0].name if len(self.mounts) == 1 else None)
        self.view = EnvironmentView(
            tuple(MountView(m.name, m.actions, m.process_capable) for m in self.mounts), self.default_mount
        )
        self._emit = emit
        self.tag = secrets.token_hex(4)
        self._next = 1
        self._references: dict[str, tuple[EnvironmentMount, Command]] = {}
        self._by_command: dict[str, str] = {}
        self._reported: set[str] = set()
        self.started_here: set[str] = set()
        """Commands `shell_exec` started in this run (`origin` in discovery)."""
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self.closed = False

    # -- binding and close ------------------------------------------------------------------------------

    def enter(self, *, thread_id: str, issuer: str, subject: str) -> None:
        """Attach restored scopes (in memory), queueing a diagnostic for each one not attached."""
        taken: set[str] = set()
        for mount in self.mounts:
            reason = mount.attach(thread_id=thread_id, issuer=issuer, subject=subject, taken=taken)
            if reason is not None:
                self._emit(
                    "state", {"type": "environment_state_not_restored", "alias": mount.name, "reason": reason}
                )

    async def close(self) -> None:
        """Run close (§8): no more calls, watchers cancelled and awaited, references dropped, mounts
        detached. Commands, their stdin and their capture go on. On the host's loop, where the watchers
        run (`harness.own_loop`)."""
        await at_home(self._close)

    async def _close(self) -> None:
        if self.closed:
            return
        self.closed = True
        watchers = list(self._watchers.values())
        for watcher in watchers:
            watcher.cancel()
        if watchers:
            await asyncio.gather(*watchers, return_exceptions=True)
        self._watchers.clear()
        self._references.clear()
        self._by_command.clear()
        for mount in reversed(self.mounts):
            mount.detach()

    def export(self, previous: Mapping[str, EnvironmentState]) -> dict[str, EnvironmentState]:
        """§9.2: the previous entries in order, each bound mount's own value in place or appended."""
        states = dict(previous)
        for mount in self.mounts:
            value = mount.state()
            if value is not None:
                states[mount.name] = value
        return states

    # -- mounts and references --------------------------------------------------------------------------

    def check_open(self) -> None:
        if self.closed:
            raise EnvironmentToolError(
                "environment_unavailable", "The run is closing.", "Start a new run to use the shell."
            )

    def mount(self, alias: str | None) -> EnvironmentMount:
        """The mount a call names, or the default one (§3.5)."""
        name = alias if alias is not None else self.default_mount
        for mount in self.mounts:
            if mount.name == name:
                return mount
        names = ", ".join(m.name for m in self.mounts)
        raise EnvironmentToolError(
            "environment_mount_unknown",
            "No mount has that name." if alias is not None else "There is no default mount.",
            f"Pass alias= one of: {names}.",
            {"mounts": [m.name for m in self.mounts]},
        )

    def reference(self, mount: EnvironmentMount, command: Command) -> str:
        """The command's reference in this run: its existing one, else the next in sequence."""
        known = self._by_command.get(command.id)
        if known is not None:
            return known
        if self._next > MAX_REFERENCES:
            raise EnvironmentToolError(
                "environment_limit_exceeded",
                f"This run issued {MAX_REFERENCES} process references.",
                "Continue in a new run.",
                {"limit": MAX_REFERENCES},
            )
        reference = f"proc-{self.tag}-{self._next}"
        self._next += 1
        self._references[reference] = (mount, command)
        self._by_command[command.id] = reference
        if not command.status.terminal:
            self._watch(reference, mount, command)
        return reference

    def resolve(self, reference: str) -> tuple[EnvironmentMount, Command]:
        """What a reference names in this run (§5.4: a reference from another run names nothing)."""
        found = self._references.get(reference)
        if found is not None:
            return found
        match = _REFERENCE.fullmatch(reference)
        reason = "malformed" if match is None else "other_run" if match.group(1) != self.tag else "not_issued"
        raise EnvironmentToolError(
            "environment_reference_unknown",
            "That process reference is unknown in this run.",
            "Process references belong to the run that returned them; call shell_info() to discover "
            "retained commands and get new references.",
            {"reason": reason},
        )

    # -- status events ----------------------------------------------------------------------------------

    def started(self, mount: EnvironmentMount, reference: str | None, command: Command) -> None:
        """`shell_status` when `shell_exec` starts a command."""
        self.started_here.add(command.id)
        self._status(mount, reference, command)
        if command.status.terminal:
            self._reported.add(command.id)

    def observed(self, mount: EnvironmentMount, reference: str, command: Command) -> None:
        """A tool saw the command; the first sight of its terminal phase is reported once."""
        if command.status.terminal and command.id not in self._reported:
            self._reported.add(command.id)
            self._status(mount, reference, command)

    def _status(self, mount: EnvironmentMount, reference: str | None, command: Command) -> None:
        status = command.status
        self._emit(
            "tool",
            {
                "type": "shell_status",
                "alias": mount.name,
                "process_id": reference,
                "phase": status.phase,
                "exit_code": status.exit_code,
            },
        )

    def _watch(self, reference: str, mount: EnvironmentMount, command: Command) -> None:
        async def watch() -> None:
            await command.wait_terminal()
            if not self.closed:
                self.observed(mount, reference, command)

        self._watchers[reference] = asyncio.ensure_future(watch())
