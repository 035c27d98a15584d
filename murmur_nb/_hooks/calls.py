"""The state of one hook call, as the host functions see it: the call's, never the host's.

A host may be called from several threads (a Dask worker's threads share one host per
process): everything one call needs (the record ``read-messages`` answers for, the deadline,
what failed inside) is in its :class:`HookCall`, made for that call and handed to the linked
host functions through :data:`CURRENT_CALL` for as long as it runs. Host functions run inside
the call, on its thread, so they see that call and no other; wasmtime's per-store data plays
this part in Rust, but wasmtime-py hands a host function no public way to reach it.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from murmur_nb._conversations.budget import ReadBudget

__all__ = ["CURRENT_CALL", "BoundedReader", "HookCall", "Reader", "ReaderSource"]


class Reader(Protocol):
    def read_messages(self, cursor: str | None, limit: int) -> Any: ...


class BoundedReader(Protocol):
    """A reader that reads within a budget (``ConversationReader`` does)."""

    def read_messages(
        self, cursor: str | None, limit: int, *, budget: ReadBudget | None = None
    ) -> Any: ...


class ReaderSource(Protocol):
    """What serves ``read-messages``; ``as_of`` is passed only when a call gives one (a
    replay's window), so a source of the caller's own may leave it out."""

    def reader(self, context_id: str | None, *, granted: bool = True) -> Any: ...


@dataclass
class HookCall:
    """One call: whom ``read-messages`` reads for, when it must end, what went wrong inside.

    ``reader`` is scoped to the record of the call's own ``context-id``, chosen when the call
    was made.

    ``deadline`` is ``time.monotonic()`` seconds, the same instant the store's epoch deadline
    stands for; host functions that wait never wait past it. ``memory_bytes`` is what the
    guest's store may hold (``limits.memory_mib``): a ``read-messages`` page is cut to it.
    ``helper`` is the clock helper's instance in this call's store, made on first use.
    ``deadline_hit`` says a host function ended the call at its deadline.
    """

    reader: Reader
    deadline: float
    memory_bytes: int
    host_failure: BaseException | None = None
    helper: Any = None
    deadline_hit: bool = False


#: The call running on this thread (``None`` outside one): set by the call for its duration.
CURRENT_CALL: ContextVar[HookCall | None] = ContextVar("murmur_nb_hook_call", default=None)
