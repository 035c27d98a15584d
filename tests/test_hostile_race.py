"""Several processes of one user on murmur-nb's shared state at the same instant.

Two notebooks open, a notebook beside a ``murmur-nb`` command, Dask workers beside the
kernel: real processes, started together (each waits on a start file, made once all of them
are ready), many rounds, and the shared state looked at afterwards.

* The sealing key: two processes that found no key each made one and renamed it into place,
  so the one whose file was replaced sealed with a key nobody kept (21 rounds of 50 with six
  processes). Its batch journal rows then failed their seal in every later kernel, which ran
  them again (paid calls paid twice), and its compiled hooks were thrown away and compiled
  again by every other kernel. Now the key is made under the key folder's lock: one process
  makes it, the others read it.
* A new batch journal: six processes opening the same new journal file at once, one was
  refused in most runs of 40 rounds with "cannot be used as a batch journal (SQLite:
  database is locked) ... Pass the path of a journal file ... or journal=None": SQLite
  switches a file to WAL without waiting for another connection's lock. Now the switch is
  asked again until the journal's 30 s busy timeout, and every process keeps its row.
* A hook built to ``output=`` while another kernel loads that file: the copy was written
  over the output in place, so the loader read an empty or half-written component (11,581
  of 11,927 reads while a build was placed 60 times). Now it is written under a temporary
  name and renamed into place.
"""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from murmur_nb._batch.journal import Journal  # private: the journal is what the key seals

ROUNDS = 20
PROCESSES = 6

#: a child: for each round, say it is ready, wait for the round's start file, do its part
_CHILD = """
import fcntl, json, os, sys
from pathlib import Path
base, me, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
from murmur_nb._batch.journal import Journal
done = []
for r in range(rounds):
    os.environ["MURMUR_NB_KEYS"] = str(base / f"keys{r}")
    with open(base / f"go-{r}") as gate:
        (base / f"ready-{r}-{me}").touch()
        fcntl.flock(gate, fcntl.LOCK_SH)  # every child wakes when the test lets go
    journal = Journal(base / f"journal{r}.sqlite")
    journal.write(("race.cap", "sha256:race"), me, "ok", "{}", 0.0)
    journal.close()
    done.append(r)
print(json.dumps(done))
"""


#: a child: each round, every child opens one new journal at once (its key given) and
#: journals a row; what it could not open it prints
_OPENER = """
import fcntl, json, os, sys
from pathlib import Path
base, me, rounds = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
from murmur_nb._batch.journal import Journal
refused = []
for r in range(rounds):
    with open(base / f"go-{r}") as gate:
        (base / f"ready-{r}-{me}").touch()
        fcntl.flock(gate, fcntl.LOCK_SH)
    try:
        journal = Journal(base / f"journal{r}.sqlite", key=bytes(32))
    except ValueError as exc:
        refused.append(str(exc))
        continue
    journal.write(("race.cap", "sha256:race"), me, "ok", "{}", 0.0)
    journal.close()
print(json.dumps(refused))
"""


def _run_together(base: Path, script: str, rounds: int = ROUNDS, deadline_s: float = 60.0
                  ) -> list[str]:  # fmt: skip
    """Run :data:`PROCESSES` children of ``script``, each round started at one instant (the
    test holds each round's start file locked until every child waits on it); their outputs.
    A child that dies or hangs fails the test (at ``deadline_s``) with what it printed."""
    gates = []
    for r in range(rounds):
        gate = (base / f"go-{r}").open("w")
        fcntl.flock(gate, fcntl.LOCK_EX)
        gates.append(gate)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(base), f"p{i}", str(rounds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(PROCESSES)
    ]
    end = time.monotonic() + deadline_s
    try:
        for r in range(rounds):
            while len(list(base.glob(f"ready-{r}-*"))) < PROCESSES:
                if time.monotonic() > end or any(c.poll() is not None for c in children):
                    break
                time.sleep(0.001)
            time.sleep(0.005)  # the last one ready is waiting on the lock by now
            gates[r].close()
        for child in children:
            child.wait(timeout=max(end - time.monotonic(), 0.1))
    except subprocess.TimeoutExpired:
        pass
    finally:
        for gate in gates:
            gate.close()
        for child in children:
            if child.poll() is None:
                child.kill()
    results = [child.communicate() for child in children]
    failed = [err or "killed: it hung" for child, (_, err) in zip(children, results, strict=True)
              if child.returncode != 0]  # fmt: skip
    assert failed == [], failed[0]
    return [out for out, _ in results]


def test_kernels_making_the_sealing_key_at_once_keep_every_journal_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Six processes open their first batch journal at once, with no key yet, and each
    journals one row: a later kernel finds every row sealed, none to run again."""
    outputs = _run_together(tmp_path, _CHILD)
    assert all(json.loads(out) == list(range(ROUNDS)) for out in outputs)
    lost = {}
    for r in range(ROUNDS):
        monkeypatch.setenv("MURMUR_NB_KEYS", str(tmp_path / f"keys{r}"))
        journal = Journal(tmp_path / f"journal{r}.sqlite")
        names = [f"p{i}" for i in range(PROCESSES)]
        found = journal.done(("race.cap", "sha256:race"), names)
        journal.close()
        if len(found) != PROCESSES:
            lost[r] = sorted(set(names) - set(found))
    assert lost == {}, f"rows whose seal failed (they would run again), by round: {lost}"


def test_kernels_opening_one_new_journal_at_once_all_use_it(tmp_path: Path) -> None:
    """Six processes start a batch on the same new journal at once: each opens it and keeps
    its row. One was refused: SQLite's ``PRAGMA journal_mode=WAL`` answers "database is
    locked" at once, without waiting, while another connection makes the file WAL, and that
    was reported as a journal that "cannot be used" (pass another path, or journal=None)."""
    outputs = _run_together(tmp_path, _OPENER, rounds=2 * ROUNDS)
    refused = [text for out in outputs for text in json.loads(out)]
    assert refused == [], refused[0]
    lost = {}
    for r in range(2 * ROUNDS):
        journal = Journal(tmp_path / f"journal{r}.sqlite", key=bytes(32))
        names = [f"p{i}" for i in range(PROCESSES)]
        found = journal.done(("race.cap", "sha256:race"), names)
        journal.close()
        if len(found) != PROCESSES:
            lost[r] = sorted(set(names) - set(found))
    assert lost == {}


#: a child rebuilding a hook to one output again and again, each time from another build
_REBUILDER = """
import sys
from pathlib import Path
from murmur_nb._hooks.build import _place
base = Path(sys.argv[1])
for i in range(int(sys.argv[2])):
    _place(base / ("a.wasm" if i % 2 else "b.wasm"), base / "hooks" / "hook.wasm")
"""


def test_a_kernel_loading_a_hook_never_reads_a_half_placed_build(tmp_path: Path) -> None:
    """A kernel builds a hook to ``output=`` (``build_python_hook``, ``build_demo_hook``)
    while another kernel loads that file: the loader reads the old build or the new one,
    whole. The build was written over the output in place (truncated, then written), so
    the loader read a prefix of it (and a hook that "is not a valid component")."""
    whole = {b"\0asm" + bytes([n]) * (4 << 20) for n in (1, 2)}
    a, b = sorted(whole)
    (tmp_path / "a.wasm").write_bytes(a)
    (tmp_path / "b.wasm").write_bytes(b)
    out = tmp_path / "hooks" / "hook.wasm"
    writer = subprocess.Popen(
        [sys.executable, "-c", _REBUILDER, str(tmp_path), "60"],
        stderr=subprocess.PIPE,
        text=True,
    )
    torn = reads = 0
    try:
        end = time.monotonic() + 60
        while writer.poll() is None and time.monotonic() < end:
            try:
                seen = out.read_bytes()
            except FileNotFoundError:
                continue
            reads += 1
            torn += seen not in whole
    finally:
        if writer.poll() is None:
            writer.kill()
        _, err = writer.communicate()
    assert writer.returncode == 0, err
    assert reads > 0 and torn == 0, f"{torn} of {reads} reads got a half-written build"
