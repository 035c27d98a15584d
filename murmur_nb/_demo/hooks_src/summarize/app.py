# mypy: ignore-errors
# (guest code: its imports exist only inside the componentize-py build)
"""The demo ``summarize`` hook, built into a component with componentize-py.

It runs inside the guest (CPython compiled to WebAssembly), not in the kernel: the only way it
sees the conversation is ``murmur:conversation/read@0.1.0``. ``on-task-start`` walks the whole
record newest-first with ``read-messages`` until ``next-cursor`` is ``none`` (the only correct
termination condition) and returns a one-line summary. ``on-compact`` keeps the system messages
and the newest turns and folds the rest into one summary message.

What it prints never names the hook: one component runs under every id ``murmur.yaml`` gives
it (the demo's ``summarize`` and ``peek``), and the host shows each output under its id.
"""

import json
import sys

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import lifecycle, read

PAGE = 100
KEEP_NEWEST = 8


def _describe(counts: dict[str, int], chars: int, total: int) -> str:
    roles = ", ".join(f"{role} {n}" for role, n in sorted(counts.items()))
    return f"{total} messages ({roles or 'none'}), {chars} characters"


class Handlers(exports.Handlers):
    def on_task_start(self, event: lifecycle.TaskStartEvent) -> str:
        counts: dict[str, int] = {}
        chars = 0
        walked = 0
        pages = 0
        tool_errors = 0
        newest = None
        oldest = None
        cursor = None
        while True:
            try:
                page = read.read_messages(cursor, PAGE)
            except Err as err:
                print(f"read-messages failed: {err.value}", file=sys.stderr)
                raise Err(
                    f"cannot read the conversation of {event.context_id}: {err.value}"
                ) from err
            pages += 1
            for message in page.messages:
                if newest is None:
                    newest = message.id
                oldest = message.id
                counts[message.role] = counts.get(message.role, 0) + 1
                chars += len(message.content)
                if message.role == "tool" and json.loads(message.content).get("is_error"):
                    tool_errors += 1
            walked += len(page.messages)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        print(f"walked {walked} messages in {pages} pages")
        note = f"task {event.task_id}: {_describe(counts, chars, walked)}"
        if tool_errors:
            note += f", {tool_errors} failed tool calls"
        if walked:
            note += f"; newest {newest}, oldest {oldest}"
        return note

    def on_compact(self, messages: list[lifecycle.Message]) -> list[lifecycle.Message]:
        system = [m for m in messages if m.role == "system"]
        rest = [m for m in messages if m.role != "system"]
        if len(rest) <= KEEP_NEWEST:
            return list(messages)
        folded, kept = rest[:-KEEP_NEWEST], rest[-KEEP_NEWEST:]
        counts: dict[str, int] = {}
        for m in folded:
            counts[m.role] = counts.get(m.role, 0) + 1
        chars = sum(len(m.content) for m in folded)
        summary = lifecycle.Message(
            id=f"summary-{folded[0].id}-{folded[-1].id}",
            role="system",
            content="Summary of earlier turns: " + _describe(counts, chars, len(folded)),
            name="summarize",
            created_at=None,
        )
        print(f"folded {len(folded)} messages, kept {len(kept)}")
        return [*system, summary, *kept]
