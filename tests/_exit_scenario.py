"""Run in a fresh interpreter by ``test_hook_exit.py``: end hook calls in every way, then exit.

Usage: ``python _exit_scenario.py COMPONENT HOME WORKDIR``. Several hosts load the same
component; their calls trap, run out of fuel, hit their deadline, run out of memory, meet a
failing host function, and one is stopped by a real SIGINT that the parent sends once this
prints ``READY-SIGINT``. Some hosts are closed, one is dropped, one sits in a reference cycle,
and the rest are left open. The script prints one JSON line of what each call returned and
ends normally: the parent checks that the process then exits with status 0 and says nothing
about a panic.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import murmur_nb as mnb
from murmur_nb import ConversationStore, HookHost

YAML = """\
hook_limits: {{time_ms: 800}}
hooks:
  quick:
    component: {component}
    limits: {{memory_mib: 48, time_ms: 800}}
  fuel:
    component: {component}
    limits: {{fuel: 30000000, time_ms: 30000}}
  reader:
    component: {component}
    capabilities: {{conversation: {{read: true}}}}
"""

LONG = """\
hooks:
  long:
    component: {component}
    limits: {{time_ms: 60000}}
"""


class FailingStore:
    """Conversations whose reader raises inside the host function, as a bug would."""

    def reader(self, context_id: str | None, *, granted: bool = True) -> Any:
        class Reader:
            def read_messages(self, cursor: str | None, limit: int) -> Any:
                raise RuntimeError("index on fire")

        return Reader()


def codes(results: dict[str, mnb.HookResult]) -> dict[str, str | None]:
    return {hook: result.code for hook, result in results.items()}


def every_ending(host: HookHost, seen: list[Any]) -> None:
    """One of each ending on this host's hooks, then a call that succeeds."""
    for task in ("!trap", "!loop", "!grow", "!read", "!trap", "fine"):
        results = host.task_start(task_id=task, context_id="ctx-1")
        seen.append([task, codes(results), results["quick"].error])


def interrupted(host: HookHost, seen: list[Any]) -> None:
    """A long call that the parent stops with SIGINT; the host stays usable."""
    print("READY-SIGINT", flush=True)
    started = time.monotonic()
    try:
        host.task_start(task_id="!loop", context_id="ctx-1")
        seen.append(["!loop", "not interrupted", time.monotonic() - started])
    except KeyboardInterrupt:
        seen.append(["!loop", "KeyboardInterrupt", time.monotonic() - started])
    after = host.task_start(task_id="after", context_id="ctx-1")["long"]
    seen.append(["after", after.value, None])


def main() -> None:
    component, home, work = (Path(arg) for arg in sys.argv[1:4])
    # A kernel has Python's own handler; a child of a shell without job control may not.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    (work / "murmur.yaml").write_text(YAML.format(component=component), encoding="utf-8")
    (work / "long.yaml").write_text(LONG.format(component=component), encoding="utf-8")
    store = ConversationStore(home)
    store.reader("ctx-1").read_messages(None, 100)  # the first read pays for imports: not a hook's
    config = mnb._hooks.config.load_hook_config(work / "murmur.yaml")
    seen: list[Any] = []

    with HookHost.from_config(work / "murmur.yaml", conversations=store) as closed:
        every_ending(closed, seen)
    explicit = HookHost(config, conversations=FailingStore(), fast_lowering=False)
    every_ending(explicit, seen)
    explicit.close()
    dropped = HookHost(config, conversations=FailingStore())
    every_ending(dropped, seen)
    del dropped
    cyclic = HookHost(config, conversations=store, fast_lowering=False)
    every_ending(cyclic, seen)
    cyclic.cycle = [cyclic]  # type: ignore[attr-defined]  # freed only by the collector
    del cyclic
    open_hosts = [HookHost(config, conversations=FailingStore()) for _ in range(2)]
    for host in open_hosts:
        every_ending(host, seen)
    long = HookHost.from_config(work / "long.yaml", conversations=store)
    interrupted(long, seen)
    # End on a trap in hosts that stay open, so stores with fresh guest output are the last.
    for host in [*open_hosts, long]:
        host.task_start(task_id="!trap", context_id="ctx-1")
    print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    main()
