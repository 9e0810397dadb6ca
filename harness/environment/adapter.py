"""`EnvironmentMount`: how one run uses one mount, once (ENVIRONMENT §3, §9.2, §9.3).

The Host makes one per mount per run (`LocalProcessBackend.mount`), handing it the entry it chose
from the checkpoint it continues. Decoding happens there, on the Host's side, and fails closed;
attaching happens when the run's stream is entered, in memory, and never fails the run: a scope that
cannot be honoured leaves the adapter without one and a diagnostic for the model and the host.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from ..errors import ErrorCode, RunError
from ..state import EnvironmentState
from .state import LocalState, RetainedCommand, decode, encode, timestamp
from .surface import SHELL_ACTIONS, is_process_capable

if TYPE_CHECKING:
    from .backend import Command, LocalProcessBackend, Scope
    from .config import LocalMountConfig

__all__ = ("EnvironmentMount", "NotRestored")

NotRestored = Literal["backend_changed", "scope_gone", "thread_mismatch", "owner_mismatch", "target_mismatch"]
"""Why a restored scope was not attached (§9.3); the first two list the evidence as `missing`."""


class EnvironmentMount:
    """A single-use adapter: one mount, bound to one run."""

    def __init__(
        self,
        backend: LocalProcessBackend,
        name: str,
        config: LocalMountConfig,
        *,
        actions: Iterable[str] = SHELL_ACTIONS,
        restore: EnvironmentState | None = None,
    ) -> None:
        self.backend = backend
        self.name = name
        self.config = config
        self.actions = frozenset(actions) & SHELL_ACTIONS
        """The effective actions: the ceiling the Host gave, within what the provider supports."""
        self.process_capable = is_process_capable(self.actions)
        self._evidence: LocalState | None = decode(name, restore)
        self._bound = False
        self.scope: Scope | None = None
        self.not_restored: NotRestored | None = None
        self.missing: tuple[RetainedCommand, ...] = ()
        """Evidenced commands whose fate is unknown (`backend_changed`, `scope_gone`)."""
        self._identity: tuple[str, str, str] | None = None

    def check_unbound(self) -> None:
        """Raises `RunError` `run_bindings_invalid` (`adapter_reused`) when a run has it already."""
        if self._bound:
            raise RunError(
                f"Mount {self.name!r} was already bound to a run; make a fresh one for every run.",
                code=ErrorCode.RUN_BINDINGS_INVALID,
                details={"reason": "adapter_reused", "mount": self.name},
            )

    def bind(self) -> None:
        """Claim the adapter for a run (at run construction, once every check passed)."""
        self.check_unbound()
        self._bound = True

    def attach(self, *, thread_id: str, issuer: str, subject: str, taken: set[str]) -> NotRestored | None:
        """Attach the restored scope if every identity matches (§9.3 step B); in memory only.

        `taken` holds the scopes other mounts of this run attached: a scope serves one mount a run.
        """
        self._identity = (thread_id, issuer, subject)
        evidence = self._evidence
        if evidence is None:
            return None
        scope = self.backend.scope(evidence.scope) if evidence.backend == self.backend.id else None
        reason: NotRestored | None
        if evidence.backend != self.backend.id:
            reason = "backend_changed"
        elif scope is None:
            reason = "scope_gone"
        elif scope.thread_id != thread_id:
            reason = "thread_mismatch"
        elif (scope.issuer, scope.subject) != (issuer, subject):
            reason = "owner_mismatch"
        elif scope.mount != self.name or scope.root != self.config.root or scope.id in taken:
            reason = "target_mismatch"
        else:
            reason = None
        if reason is None:
            assert scope is not None
            self.scope = scope
            taken.add(scope.id)
            self.backend.bind(scope)
            return None
        self.not_restored = reason
        if reason in ("backend_changed", "scope_gone"):
            self.missing = tuple(evidence.commands)
        return reason

    def own_scope(self) -> Scope:
        """The adapter's scope, made now if it has none (the first command retained in this run)."""
        if self.scope is None:
            assert self._identity is not None, "attach() runs when the stream is entered"
            thread_id, issuer, subject = self._identity
            self.scope = self.backend.new_scope(
                thread_id=thread_id, issuer=issuer, subject=subject, mount=self.name, root=self.config.root
            )
            self.backend.bind(self.scope)
        return self.scope

    def commands(self) -> list[Command]:
        """The scope's retained commands, oldest first (none without a scope)."""
        return self.backend.commands(self.scope) if self.scope is not None else []

    def state(self) -> EnvironmentState | None:
        """The portable value to export, or `None` while the adapter has no state (§9.2); no I/O."""
        if self.scope is None:
            return None
        retained = [
            RetainedCommand(id=command.id, started_at=timestamp(command.started_at))
            for command in self.commands()
        ]
        return encode(LocalState(backend=self.backend.id, commands=retained, scope=self.scope.id))

    def detach(self) -> None:
        """Let go of the scope at run close; its commands and their capture go on (§8)."""
        if self.scope is not None:
            self.backend.unbind(self.scope)
