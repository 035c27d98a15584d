"""A HookHost used from several threads: each call reads the record it was made for.

The hooks share one engine and run one at a time, but the calls of several threads
interleave: what a call's ``read-messages`` answers for is the call's own, never the host's
(a Dask worker's threads share one host per process; see test_hook_replay_dask.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_hook_replay import assemble, capsule, talk, write

import murmur_nb as mnb
from murmur_nb._hooks.config import load_hook_config  # private: fast_lowering=False needs it

GRANTED = """\
hooks:
  reader:
    component: hooks/guest.wasm
    capabilities: {conversation: {read: true}}
"""
THREADS = 4
ROUNDS = 25


@pytest.fixture
def records(murmur_home: Path) -> dict[str, int]:
    """Four records of distinct lengths: context id -> messages."""
    sizes = {f"rec-{i}": 3 + 5 * i for i in range(THREADS)}
    for context, n in sizes.items():
        write(murmur_home, context, talk(n))
    return sizes


@pytest.fixture(params=[True, False], ids=["fast", "generic"])
def hooks(
    request: pytest.FixtureRequest, tmp_path: Path, murmur_home: Path, records: dict[str, int]
) -> Iterator[mnb.HookHost]:
    path = capsule(tmp_path / "capsule", GRANTED, guest=assemble("guest.wat"))
    config = load_hook_config(path)
    with mnb.HookHost(config, conversations=mnb.ConversationStore(murmur_home),
                      fast_lowering=request.param) as host:  # fmt: skip
        yield host


def in_threads(work: Callable[[str], list[str]], contexts: list[str]) -> dict[str, list[str]]:
    """``work(context)`` on one thread per context, all started together: what each saw."""
    seen: dict[str, list[str]] = {}
    barrier = threading.Barrier(len(contexts))

    def run(context: str) -> None:
        barrier.wait()
        seen[context] = work(context)

    threads = [threading.Thread(target=run, args=(c,)) for c in contexts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return seen


def test_task_start_reads_its_own_record_from_every_thread(
    hooks: mnb.HookHost, records: dict[str, int]
) -> None:
    def work(context: str) -> list[str]:
        return [hooks.task_start(task_id="!read", context_id=context)["reader"].value
                for _ in range(ROUNDS)]  # fmt: skip

    seen = in_threads(work, list(records))
    for context, n in records.items():
        assert set(seen[context]) == {f"{n}|{n}|{context}-{n - 1}|-"}


def test_compact_reads_the_record_it_is_given_from_every_thread(
    hooks: mnb.HookHost, records: dict[str, int]
) -> None:
    def work(context: str) -> list[str]:
        got = []
        for _ in range(ROUNDS):
            hooks.task_start(task_id="t", context_id=context)
            kept = hooks.compact([], context_id=context)["reader"].value
            got.append(",".join(m.id for m in kept))
        return got

    seen = in_threads(work, list(records))
    for context, n in records.items():
        assert set(seen[context]) == {",".join(f"{context}-{i}" for i in reversed(range(n)))}
