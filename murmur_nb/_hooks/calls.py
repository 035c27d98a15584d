"""The state of the one hook call in progress, as the host functions see it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["HookCall", "Reader", "ReaderSource"]


class Reader(Protocol):
    def read_messages(self, cursor: str | None, limit: int) -> Any: ...


class ReaderSource(Protocol):
    def reader(self, context_id: str | None, *, granted: bool = True) -> Any: ...


@dataclass
class HookCall:
    """One call: whom ``read-messages`` reads for, when it must end, what went wrong inside.

    ``deadline`` is ``time.monotonic()`` seconds, the same instant the store's epoch deadline
    stands for; host functions that wait never wait past it. ``helper`` is the clock helper's
    instance in this call's store, made on first use. ``deadline_hit`` says a host function
    ended the call at its deadline.
    """

    reader: Reader
    deadline: float
    host_failure: BaseException | None = None
    helper: Any = None
    deadline_hit: bool = False
