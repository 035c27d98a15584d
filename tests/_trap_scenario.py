"""Run in a fresh interpreter by ``test_hook_traps.py``: guest traps after ``faulthandler``
took wasmtime's signal handlers.

Usage: ``python -X faulthandler _trap_scenario.py COMPONENT HOME [crash]``. One call runs
(the engine, and with it wasmtime's trap handlers, now exist); then ``faulthandler`` is
enabled again, as pytest's in-process runs and notebook tools do, which puts its handler in
front of wasmtime's. Guests then trap by ``unreachable`` (SIGILL), a stack overflow
(SIGSEGV on a guard page) and an out-of-bounds load, twice each. The script prints one JSON
line of the result codes. With ``crash`` it then faults outside any guest, to show that
faulthandler still reports such a crash.
"""

from __future__ import annotations

import faulthandler
import json
import sys
from pathlib import Path

from murmur_nb import ConversationStore, HookHost

component, home = Path(sys.argv[1]), Path(sys.argv[2])
config = home.parent / "murmur.yaml"
config.write_text(f"hooks:\n  guest:\n    component: {component}\n", encoding="utf-8")
with HookHost.from_config(config, conversations=ConversationStore(home)) as hooks:
    codes = [hooks.task_start(task_id="warm-up", context_id="ctx-1")["guest"].code]
    faulthandler.disable()
    faulthandler.enable()
    for task in ("!trap", "!deep", "!bounds") * 2:
        codes.append(hooks.task_start(task_id=task, context_id="ctx-1")["guest"].code)
    codes.append(hooks.task_start(task_id="after", context_id="ctx-1")["guest"].code)
print(json.dumps(codes), flush=True)
if sys.argv[3:] == ["crash"]:
    faulthandler._sigsegv()  # a real fault in the interpreter, outside any guest
