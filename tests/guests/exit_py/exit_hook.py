# mypy: ignore-errors
# (guest code: its imports exist only inside the componentize-py build)
"""A hook that ends its calls on demand (built with componentize-py); see ``on_task_start``."""

import sys

from wit_world import exports
from wit_world.imports import read


class Handlers(exports.Handlers):
    def on_task_start(self, event):
        """``!trap`` prints, then raises (the guest traps); ``!loop`` spins; ``!grow``
        allocates until memory runs out; ``!read`` reads a page; anything else is echoed."""
        task = event.task_id
        if task == "!trap":
            print("exit_hook: about to raise")
            raise RuntimeError("exit_hook says boom")
        if task == "!loop":
            x = 0
            while True:
                x = (x * 31 + 7) & 0xFFFF
        if task == "!grow":
            keep = []
            while True:
                keep.append(bytearray(1 << 20))
        if task == "!read":
            page = read.read_messages(None, 100)
            return f"{len(page.messages)}|{page.total}"
        print("exit_hook: echo", task)
        print("exit_hook: on stderr", file=sys.stderr)
        return task

    def on_compact(self, messages):
        return messages
