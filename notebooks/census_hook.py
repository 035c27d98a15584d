"""A hook that reads the conversation: failed tool calls per tool.

on-compact misbehaves on purpose, as the first message asks: "spin" loops forever,
"hoard" allocates until memory runs out. It shows what a hook's limits do.

Tutorial 03 (``03-hook-components.ipynb``) copies this file into the demo home and builds it
with ``mnb.build_python_hook``; the ``wit_world`` bindings exist only inside that build.
"""

import json

from wit_world import exports
from wit_world.imports import lifecycle, read


class Handlers(exports.Handlers):
    def on_task_start(self, event: lifecycle.TaskStartEvent) -> str:
        failed: dict[str, int] = {}
        calls = 0
        cursor = None
        while True:  # next-cursor none is the only correct end of a walk
            page = read.read_messages(cursor, 100)
            for message in page.messages:
                if message.role == "tool":
                    calls += 1
                    envelope = json.loads(message.content)
                    if envelope["is_error"]:
                        tool = message.name or "?"
                        failed[tool] = failed.get(tool, 0) + 1
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        worst = sorted(failed.items(), key=lambda kv: (-kv[1], kv[0]))
        listed = ", ".join(f"{tool} {n}" for tool, n in worst)
        return f"{sum(failed.values())} of {calls} tool calls failed: {listed}"

    def on_compact(self, messages: list[lifecycle.Message]) -> list[lifecycle.Message]:
        mode = messages[0].content if messages else ""
        if mode == "spin":
            n = 0
            while True:
                n += 1
        if mode == "hoard":
            hoard = []
            while True:
                hoard.append(bytearray(1 << 20))
        return messages
