"""The records the hook checker drives a hook with, written the way the runtime writes them.

Each case is a real record under a temporary murmur home (``RecordWriter``, one line per
message), so ``on-task-start`` pages through it with ``read-messages`` exactly as in a
capsule, and ``on-compact`` gets the record's messages as the reader serves them (tool
results in their envelope). Ids and timestamps are fixed, so two runs see the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from murmur_nb._conversations.store import ConversationStore, Message
from murmur_nb._conversations.writer import RecordWriter

__all__ = ["CASES", "Case", "read_back", "write_cases"]

#: Text no ASCII-only hook survives: accents, CJK, right-to-left, combining marks, a zero-width
#: joiner sequence, astral characters (emoji, mathematical letters) and a NUL.
UNICODE_TEXT = (
    "caf\u00e9 na\u00efve \u4e16\u754c \u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627 "
    "e\u0301 \U0001f469\u200d\U0001f4bb \U0001f600 \U0001d518\U0001d52b\U0001d526 \x00 end"
)
HUGE_CHARS = 4 << 20
MANY = 10_000
STAMP = "2026-01-01T00:00:00Z"


@dataclass(frozen=True)
class Case:
    """One generated record: its name (also its context id) and what it is for."""

    name: str
    about: str

    @property
    def context_id(self) -> str:
        return f"check-{self.name}"


CASES: tuple[Case, ...] = (
    Case("empty", "no messages"),
    Case("one", "one user message"),
    Case("many", f"{MANY:,} messages"),
    Case("unicode", "non-ASCII and astral text in contents, names and ids"),
    Case("huge", f"one content of {HUGE_CHARS >> 20} MiB"),
    Case("odd-roles", "tool results, an empty role, unusual and upper-case roles"),
    Case("sparse", "no name, no created_at, tool results without call id or error flag"),
)


def _lines(case: str) -> Iterator[dict[str, Any]]:
    """The ``RecordWriter.append`` keyword arguments of one case's messages, in order."""
    if case == "one":
        yield {"role": "user", "content": "hello", "created_at": STAMP}
    elif case == "many":
        yield {"role": "system", "content": "You are terse.", "created_at": STAMP}
        for i in range(1, MANY):
            role = "user" if i % 2 else "assistant"
            yield {"role": role, "content": f"turn {i}", "created_at": STAMP}
    elif case == "unicode":
        yield {"role": "system", "content": UNICODE_TEXT, "created_at": STAMP}
        yield {"role": "user", "content": UNICODE_TEXT * 3, "name": "\u00e9l\u00e8ve \U0001f393"}
        yield {"role": "assistant", "content": "\U0001f600" * 500, "id": "r\u00e9ponse-\U0001f600"}
    elif case == "huge":
        yield {"role": "system", "content": "Keep it short.", "created_at": STAMP}
        yield {"role": "user", "content": "x" * HUGE_CHARS, "created_at": STAMP}
        yield {"role": "assistant", "content": "ok", "created_at": STAMP}
    elif case == "odd-roles":
        yield from _odd_roles()
    elif case == "sparse":
        yield {"role": "user", "content": "no name, no time"}
        yield {"role": "tool", "content": {"rows": 3}}
        yield {"role": "assistant", "content": ""}


def _odd_roles() -> Iterator[dict[str, Any]]:
    yield {"role": "system", "content": "setup", "created_at": STAMP}
    yield {"role": "user", "content": "run it", "created_at": STAMP}
    yield {"role": "tool", "content": {"rows": [1, 2]}, "tool_call_id": "c1", "is_error": False}
    yield {"role": "tool", "content": "boom", "tool_call_id": "c2", "is_error": True}
    yield {"role": "", "content": "an empty role"}
    yield {"role": "SYSTEM", "content": "upper case"}
    yield {"role": "developer", "content": "a newer role", "name": "ops"}
    yield {"role": "narrator \U0001f3ad", "content": "an astral role"}


def write_cases(home: Path) -> ConversationStore:
    """Write every case's record under ``home``; return the store that reads them."""
    store = ConversationStore(home)
    for case in CASES:
        with RecordWriter(store, case.context_id, buffered=True, stamp=False) as writer:
            for n, kwargs in enumerate(_lines(case.name)):
                kwargs.setdefault("id", f"{case.name}-{n}")
                writer.append(**kwargs)
    return store


def read_back(store: ConversationStore, case: Case) -> list[Message]:
    """The case's messages, oldest first, as the reader serves them (what a runtime compacts)."""
    reader = store.reader(case.context_id)
    newest_first: list[Message] = []
    cursor = None
    while True:
        page = reader.read_messages(cursor, 100)
        newest_first.extend(page.messages)
        if page.next_cursor is None:
            return newest_first[::-1]
        cursor = page.next_cursor
