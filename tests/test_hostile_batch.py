"""Hostile batches: a module lying about its cost, a forged journal, hostile input cells.

Each test does the hostile thing for real (a sandboxed module reporting the cost, an edit of
the SQLite journal file, another account's link in place of a root kernel's journal, a
5,000-deep cell, a DataFrame with a column twice) and looks at what ran: the files the module
drops into its ``log`` root, one per real run.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _modules import install
from _users import rerun, reruns_in_each_setting, run_as_test_user, test_user

import murmur_nb as mnb

FACET_MODULES = [("batchy", "batchy"), ("costs", "costs")]


@pytest.fixture
def host(facet_home: Path, log_root: Path) -> mnb.ModuleHost:
    with mnb.ModuleHost(home=facet_home, policy=mnb.Policy(roots={"log": str(log_root)})) as h:
        yield h


def runs(log_root: Path, pattern: str = "*") -> list[str]:
    return sorted(p.name for p in log_root.glob(pattern))


def nested(depth: int) -> Any:
    """Lists nested ``depth`` levels deep, built without recursion."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


# -- costs ------------------------------------------------------------------------------


def test_a_negative_cost_does_not_buy_the_rest_of_a_capped_batch(
    host: mnb.ModuleHost, log_root: Path
) -> None:
    """A row reporting ``actual_cost: -1e9`` once paid for every other row under max_cost."""
    inputs = [{"n": i, "cost": -1e9 if i == 2 else 1.0} for i in range(20)]
    batch = host.map("costs.spend", inputs, max_cost=3, progress=False, journal=None)
    out = batch.to_pandas()
    liar = out.iloc[2]
    assert (liar["status"], liar["error_code"]) == ("failed", "protocol_violation")
    assert "actual_cost" in liar["error_message"] and pd.isna(liar["actual_cost"])
    assert len(runs(log_root)) == 3  # rows 0, 1 and the liar; nothing after it
    assert set(out["error_code"].iloc[3:]) == {"cost_unknown"}
    assert (out["status"].iloc[3:] == "not_run").all()
    assert batch.progress.cost == 2 and batch.progress.cost_unknown == 1


@pytest.mark.parametrize(
    ("cost", "rule", "said"),
    [("nan", "json", "NaN is not JSON"), ("inf", "json", "Infinity is not JSON"),
     ("-inf", "json", "-Infinity is not JSON"), (-0.5, "cost", "finite number of at least 0"),
     ("string", "cost", "finite number of at least 0")],
)  # fmt: skip
def test_invoke_refuses_a_cost_that_is_no_cost(
    host: mnb.ModuleHost, cost: Any, rule: str, said: str
) -> None:
    """NaN and the infinities (as Python's ``json`` writes them) make the envelope no JSON at
    all (tests/test_hostile_numbers.py); the cost is unknown either way."""
    with pytest.raises(mnb.ProtocolViolation) as err:
        host.invoke("costs.spend", {"n": 1, "cost": cost})
    exc = err.value
    assert (exc.code, exc.rule) == ("protocol_violation", rule)
    assert said in exc.message
    # the lie is not kept as the call's cost: unknown, never NaN or negative
    assert exc.invocation.execution.actual_cost is None
    assert exc.invocation.execution.estimated_cost is None
    audit = host.audit()
    assert audit["outcome"].iloc[-1] == "protocol_violation"
    assert audit["actual_cost"].iloc[-1] is pd.NA


def test_a_nan_cost_stops_a_capped_batch(host: mnb.ModuleHost, log_root: Path) -> None:
    inputs = [{"n": i, "cost": "nan" if i == 0 else 1.0} for i in range(10)]
    batch = host.map("costs.spend", inputs, max_cost=3, progress=False, journal=None)
    out = batch.to_pandas()
    assert out["error_code"].iloc[0] == "protocol_violation"
    assert set(out["error_code"].iloc[1:]) == {"cost_unknown"}
    assert len(runs(log_root)) == 1


def test_a_resumed_batch_counts_what_its_journal_already_spent(
    host: mnb.ModuleHost, log_root: Path
) -> None:
    inputs = [{"n": i, "cost": 1.0} for i in range(10)]
    first = host.map("costs.spend", inputs[:4], progress=False)
    assert first.progress.cost == 4 and len(runs(log_root)) == 4
    resumed = host.map("costs.spend", inputs, max_cost=5, progress=False)
    p = resumed.progress
    assert p.from_journal == 4 and p.cost == 5, p.line()
    assert len(runs(log_root)) == 5  # one new row: 4 spent + 1 reaches max_cost=5
    out = resumed.to_pandas()
    assert list(out["status"]) == ["ok"] * 5 + ["not_run"] * 5
    assert set(out["error_code"].iloc[5:]) == {"max_cost"}


def test_retried_attempts_count_against_max_cost(host: mnb.ModuleHost, log_root: Path) -> None:
    """Each attempt of a retried row costs what it reports, not only the last one."""
    inputs = [{"n": i, "tries": 2, "cost": 1.0} for i in range(3)]
    batch = host.map("batchy.flaky", inputs, retries=3, backoff=0.01, max_cost=4,
                     progress=False)  # fmt: skip
    attempts = runs(log_root, "flaky-*")
    assert batch.progress.cost == len(attempts) <= 4, batch.progress.line()
    # a journal entry keeps what all of its row's attempts spent
    again = host.map("batchy.flaky", inputs, progress=False)
    assert again.progress.cost == len(attempts)


# -- the journal --------------------------------------------------------------------------


def test_a_row_edited_in_the_journal_is_run_again_not_reported(
    host: mnb.ModuleHost, facet_home: Path, log_root: Path
) -> None:
    inputs = [{"n": i, "fail_every": 3} for i in range(5)]  # n=0 and n=3 fail
    first = host.map("batchy.work", inputs, progress=False)
    assert len(runs(log_root)) == 5 and first.progress.failed == 2
    journal = facet_home / "batches" / "journal.sqlite"
    with sqlite3.connect(journal) as db:
        keyed = db.execute("SELECT input_key, record FROM rows").fetchall()
        forged = {}
        for key, text in keyed:
            record = json.loads(text)
            if record["result"] == {"n": 1, "square": 1}:  # an ok row reports a forged result
                record["result"] = {"v": "FORGED"}
                forged["result"] = key
                db.execute("UPDATE rows SET record=? WHERE input_key=?",
                           (json.dumps(record), key))  # fmt: skip
            elif (record["error"] or {}).get("message") == "3 is divisible by 3":
                forged["status"] = key  # a failed row claims to be ok
                record.update(status="ok", ok=True, error=None, result={"n": 3, "square": 0})
                db.execute("UPDATE rows SET status='ok', record=? WHERE input_key=?",
                           (json.dumps(record), key))  # fmt: skip
    assert set(forged) == {"result", "status"}
    again = host.map("batchy.work", inputs, progress=False)
    out = again.to_pandas()
    assert list(out["from_journal"]) == [True, False, True, False, True]
    assert again[1].result == {"n": 1, "square": 1}
    assert out["error_code"].iloc[3] == "bad_number"
    assert all(inv.result != {"v": "FORGED"} for inv in again)
    assert len(runs(log_root, "work-1-*")) == 2 and len(runs(log_root, "work-3-*")) == 2
    assert len(runs(log_root)) == 7  # only the two forged rows ran again
    # an entry edited after the batch settled it is not reported either
    with sqlite3.connect(journal) as db:
        edited = db.execute("""UPDATE rows SET record=replace(replace(record, '"square": 4',
                                 '"square": 5'), '"square":4', '"square":5')
                                 WHERE record LIKE '%"square": 4%'
                                 OR record LIKE '%"square":4%'""").rowcount
    assert edited == 1
    assert again.to_pandas()["error_code"].iloc[2] == "journal_changed"
    assert again[1].result == {"n": 1, "square": 1}


def test_rows_of_a_journal_that_sealed_nothing_run_again(
    host: mnb.ModuleHost, facet_home: Path, log_root: Path
) -> None:
    """A journal file of the layout written before rows were sealed (or planted in it):
    its rows are taken for nothing, run again, and replaced by sealed ones."""
    sealed = facet_home / "sealed.sqlite"
    host.map("batchy.work", [{"n": 1}], progress=False, journal=sealed)
    with sqlite3.connect(sealed) as db:
        (row,) = db.execute("SELECT capability, module_digest, input_key, record FROM rows")
    journal = facet_home / "batches" / "journal.sqlite"
    journal.parent.mkdir(parents=True)
    record = json.dumps({**json.loads(row[3]), "result": {"v": "FORGED"}})
    with sqlite3.connect(journal) as db:
        db.execute("CREATE TABLE rows (capability TEXT NOT NULL, module_digest TEXT NOT NULL, "
                   "input_key TEXT NOT NULL, status TEXT NOT NULL, record TEXT NOT NULL, "
                   "finished REAL NOT NULL, PRIMARY KEY (capability, module_digest, input_key)"
                   ") WITHOUT ROWID")  # fmt: skip
        db.execute("INSERT INTO rows VALUES (?, ?, ?, 'ok', ?, 0)", (*row[:3], record))
    again = host.map("batchy.work", [{"n": 1}], progress=False)
    assert again.progress.from_journal == 0 and again[0].result == {"n": 1, "square": 1}
    assert len(runs(log_root)) == 2
    third = host.map("batchy.work", [{"n": 1}], progress=False)
    assert third.progress.from_journal == 1 and len(runs(log_root)) == 2


_ROWS = ("capability TEXT NOT NULL, module_digest TEXT NOT NULL, input_key TEXT NOT NULL, "
         "status TEXT NOT NULL, record TEXT NOT NULL, finished REAL NOT NULL, spent REAL, "
         "seal TEXT NOT NULL DEFAULT '', PRIMARY KEY (capability, module_digest, input_key)")
_ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT 20000000)"
#: SQL a journal file can hold that SQLite runs when the journal is read or written
_PLANTED = {
    # every read walks 20 million rows (without the LIMIT: for ever, Ctrl-C or not)
    "view": [f"CREATE VIEW rows (capability, module_digest, input_key, status, record, "
             f"finished, spent, seal) AS {_ENDLESS} SELECT 'c' || x, 'd' || x, x, 'ok', '{{}}', "
             "0, 0, '' FROM c"],
    # every row written writes 20 MB more
    "trigger": [f"CREATE TABLE rows ({_ROWS})", "CREATE TABLE junk (b)",
                "CREATE TRIGGER t AFTER INSERT ON rows BEGIN INSERT INTO junk "
                f"{_ENDLESS.replace('20000000', '20')} SELECT zeroblob(1000000) FROM c; END"],
    # every row written makes a string of 50 MB
    "check": [f"CREATE TABLE rows ({_ROWS}, CHECK (length(printf('%.*c', 50000000, 'x'))))"],
}


@pytest.mark.parametrize("planted", sorted(_PLANTED))
def test_a_journal_holding_sql_of_its_own_is_refused_before_it_runs(
    host: mnb.ModuleHost, tmp_path: Path, log_root: Path, planted: str
) -> None:
    """The seals cover rows, not the file: a view named ``rows`` of an endless recursive
    query held ``map`` for good (600 s of CPU, Ctrl-C ignored, until killed), and a trigger
    wrote 955 MB into a journal over 5 rows. Anything but the journal's own table is
    refused before anything runs, and the file is left as it was."""
    journal = tmp_path / "planted.sqlite"
    with contextlib.closing(sqlite3.connect(journal)) as db:
        db.execute("PRAGMA journal_mode=WAL")  # as a journal's (map sets it first)
        for statement in _PLANTED[planted]:
            db.execute(statement)
        db.commit()
    before = journal.read_bytes()
    with pytest.raises(ValueError, match="no batch journal holds") as err:
        host.map("batchy.work", [{"n": i} for i in range(3)], progress=False, journal=journal)
    assert "journal=None" in str(err.value)
    assert runs(log_root) == [] and journal.read_bytes() == before


def test_a_journal_of_the_layout_before_seals_is_still_brought_up_to_date(
    host: mnb.ModuleHost, tmp_path: Path, log_root: Path
) -> None:
    journal = tmp_path / "old.sqlite"
    with contextlib.closing(sqlite3.connect(journal)) as db:
        db.execute("CREATE TABLE rows (capability TEXT NOT NULL, module_digest TEXT NOT NULL, "
                   "input_key TEXT NOT NULL, status TEXT NOT NULL, record TEXT NOT NULL, "
                   "finished REAL NOT NULL, PRIMARY KEY (capability, module_digest, input_key)"
                   ") WITHOUT ROWID")  # fmt: skip
    host.map("batchy.work", [{"n": 1}], progress=False, journal=journal)
    again = host.map("batchy.work", [{"n": 1}], progress=False, journal=journal)
    assert again.progress.from_journal == 1 and len(runs(log_root)) == 1


# -- a root kernel's journal where another account can write ------------------------------

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="another account against a root kernel")

#: the test account: ``argv[1]`` made a link to ``argv[2]``, once ``argv[2]`` is made an empty
#: file of its own that anyone may read and write (``argv[3] == "own"``; SQLite writes a new
#: database into an empty file)
PLANT = """\
import os, sys
link, target, own = sys.argv[1:]
if own == "own":
    os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    os.chmod(target, 0o666)
os.makedirs(os.path.dirname(link), exist_ok=True)
os.symlink(target, link)
"""


def _plant(link: Path, target: Path, scratch: Path, *, own: bool) -> None:
    """The test account makes ``link`` a link to ``target`` (an empty file of its own first
    when ``own``)."""
    argv = [sys.executable, "-S", "-c", PLANT, str(link), str(target), "own" if own else "-"]
    done = run_as_test_user(argv, scratch)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert link.lstat().st_uid == test_user() and link.readlink() == target


def _beside(path: Path) -> list[str]:
    """SQLite's files beside ``path`` (its ``-wal``, ``-shm``, ``-journal``)."""
    return sorted(p.name for p in path.parent.glob(f"{path.name}-*"))


@as_root
def test_a_root_journal_another_account_links_to_a_file_of_its_own_is_refused(
    host: mnb.ModuleHost, open_folder: Path, reachable: Path, log_root: Path
) -> None:
    """SQLite follows links: in a folder another account can write, the account made
    ``journal.db`` a link to an empty file of its own, and a root kernel's ``map`` wrote
    every row's result into that file for the account to read. Such a journal is refused,
    naming the folder, before anything runs; the account's file stays empty."""
    scratch = reachable / "scratch"
    mine, journal = scratch / "mine.db", open_folder / "journal.db"
    _plant(journal, mine, scratch, own=True)
    assert mine.stat().st_uid == test_user() and mine.read_bytes() == b""
    with pytest.raises(ValueError, match="cannot be used as a batch journal") as err:
        host.map("batchy.work", [{"n": i} for i in range(3)], progress=False, journal=journal)
    assert str(open_folder) in str(err.value) and "journal=None" in str(err.value)
    assert "nothing was run and nothing was written" in str(err.value)
    assert runs(log_root) == []
    assert mine.read_bytes() == b""  # no "SQLite format 3", no row
    assert _beside(mine) == [] and _beside(journal) == []


@as_root
def test_a_root_journal_linked_to_a_path_only_root_may_write_makes_nothing_there(
    host: mnb.ModuleHost, open_folder: Path, reachable: Path, tmp_path: Path, log_root: Path
) -> None:
    """The link may lead where only root may write (``tmp_path`` is root's alone): a root
    kernel made an SQLite file there, by the account's say. Refused; nothing is made."""
    target = tmp_path / "only-root.db"
    journal = open_folder / "journal.db"
    _plant(journal, target, reachable / "scratch", own=False)
    with pytest.raises(ValueError, match="cannot be used as a batch journal") as err:
        host.map("batchy.work", [{"n": i} for i in range(3)], progress=False, journal=journal)
    assert str(open_folder) in str(err.value)
    assert runs(log_root) == []
    assert not os.path.lexists(target) and _beside(target) == []


@as_root
def test_a_root_journal_in_root_folders_works_and_resumes_the_default_one_too(
    host: mnb.ModuleHost, tmp_path: Path, reachable: Path, log_root: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """A journal in root's folders (``tmp_path``), and a link root made there to it, work
    and resume as before. A root host whose home is another account's (``sudo -E`` keeps a
    user's ``HOME``) kept its default journal there, where the account had planted
    ``batches/journal.sqlite`` as a link to a file of its own: the default journal now goes
    to the murmur-nb cache, the batch runs and resumes, and the account's file stays empty."""
    inputs = [{"n": i} for i in range(3)]
    journal = tmp_path / "runs" / "journal.sqlite"
    assert host.map("batchy.work", inputs, progress=False, journal=journal).progress.ok == 3
    latest = tmp_path / "latest.sqlite"
    latest.symlink_to(journal)
    again = host.map("batchy.work", inputs, progress=False, journal=latest)
    assert again.progress.from_journal == 3 and len(runs(log_root)) == 3
    assert _beside(latest) == []

    scratch = reachable / "scratch"
    home = scratch / "home"
    install(home, "batchy", "batchy")
    for path in (scratch, *scratch.rglob("*")):  # the account's home, as sudo -E keeps it
        os.chown(path, test_user(), -1, follow_symlinks=False)
    mine = scratch / "mine.db"
    _plant(home / "batches" / "journal.sqlite", mine, scratch, own=True)  # chowns scratch
    monkeypatch.setenv("MURMUR_NB_CACHE", str(tmp_path / "cache"))  # not root's shared one
    policy = mnb.Policy(roots={"log": str(log_root)})
    with mnb.ModuleHost(home=home, policy=policy) as theirs:
        first = theirs.map("batchy.work", inputs, progress=False)
        assert first.progress.ok == 3 and len(runs(log_root)) == 6
        assert mine.read_bytes() == b"" and _beside(mine) == []  # root wrote its rows there
        assert first.journal.path == tmp_path / "cache" / "batches" / "journal.sqlite"
        resumed = theirs.map("batchy.work", inputs, progress=False)
        assert resumed.progress.from_journal == 3 and len(runs(log_root)) == 6
    assert mine.read_bytes() == b"" and _beside(mine) == []


# -- hostile cells ------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [65, 900, 5_000])
def test_a_deeply_nested_cell_is_an_invalid_input_row(
    host: mnb.ModuleHost, log_root: Path, depth: int
) -> None:
    """The input object is level 1: ``extra`` nested ``depth - 1`` levels makes ``depth``."""
    deep = nested(depth - 1)
    inputs = [{"n": 1, "extra": deep}, {"n": 2, "extra": nested(63)}]
    batch = host.map("batchy.work", inputs, on_invalid="skip", progress=False, journal=None)
    out = batch.to_pandas()
    assert list(out["status"]) == ["not_run", "ok"]
    assert out["error_code"].iloc[0] == "invalid_input"
    assert "deeper than 64 levels" in out["error_message"].iloc[0]
    assert "'extra'" in out["error_message"].iloc[0]
    assert runs(log_root) == runs(log_root, "work-2-*") != []
    frame = pd.DataFrame({"n": [1, 2], "extra": [deep, None]})
    with pytest.raises(mnb.InvalidInput, match=r"row 0: .*deeper than 64 levels"):
        host.map("batchy.work", frame, progress=False, journal=None)
    assert len(runs(log_root)) == 1  # nothing more ran


def test_keys_that_collide_once_json_encoded_are_refused_naming_the_column(
    host: mnb.ModuleHost, log_root: Path
) -> None:
    clash = {1: "a", "1": "b"}
    listed = host.map("batchy.work", [{"n": 1, "extra": clash}], on_invalid="skip",
                      progress=False, journal=None)  # fmt: skip
    framed = host.map("batchy.work", pd.DataFrame({"n": [1], "extra": [clash]}),
                      on_invalid="skip", progress=False, journal=None)  # fmt: skip
    for batch in (listed, framed):
        out = batch.to_pandas()
        assert (out["status"].iloc[0], out["error_code"].iloc[0]) == ("not_run", "invalid_input")
        message = out["error_message"].iloc[0]
        assert "'extra'" in message and "1 and '1'" in message and "rename" in message
    assert runs(log_root) == []
    # keys that stay distinct are sent as JSON sends them
    mixed = host.map("batchy.work", [{"n": 1, "extra": {1: "a", "x": "b", None: "c"}}],
                     progress=False, journal=None)  # fmt: skip
    assert mixed[0].request.input["extra"] == {"1": "a", "x": "b", "null": "c"}


def test_duplicate_columns_are_refused_naming_them(host: mnb.ModuleHost, log_root: Path) -> None:
    frame = pd.DataFrame([[1, 2, "x"]], columns=["n", "n", "tag"])
    with pytest.raises(mnb.InvalidInput) as err:
        host.map("batchy.work", frame, progress=False, journal=None)
    message = err.value.message
    assert "'n'" in message and "'tag'" not in message
    assert "df.columns" in message and "rename" in message
    assert runs(log_root) == []


# -- a hostile payload on a Dask worker ------------------------------------------------------

#: a Dask worker process installing the payload ``argv[1]`` (``(name, entries)``, a Python
#: literal) as a worker does on its first row; prints what came of it and what its temporary
#: folder holds after
INSTALL = """\
import ast, json, os, sys
import murmur_nb as mnb
from murmur_nb._batch.payload import Payload, install
from murmur_nb._files.scratch import temp_folder
name, entries = ast.literal_eval(sys.argv[1])
try:
    said = {"installed": str(install(Payload(name, "m.x", "sha256:" + "0" * 64, entries),
                                     mnb.Policy()))}
except Exception as exc:
    said = {"refused": type(exc).__name__, "code": getattr(exc, "code", None),
            "message": str(exc)}
said["left"] = sorted(os.listdir(temp_folder()))
print(json.dumps(said))
"""


def _install_on_a_worker(name: str, entries: tuple[Any, ...], tmp: Path) -> dict[str, Any]:
    """:data:`INSTALL` in a process of its own whose temporary folder is ``tmp``."""
    tmp.mkdir(exist_ok=True)
    done = subprocess.run([sys.executable, "-c", INSTALL, repr((name, entries))], check=False,
                          env={**os.environ, "TMPDIR": str(tmp)}, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    said: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return said


def _refused_for(said: dict[str, Any], reason: str) -> None:
    """The worker refused the payload as ``digest_mismatch``, saying ``reason`` and what to
    do, and left no folder of it behind."""
    assert (said.get("refused"), said.get("code")) == ("DigestRefused", "digest_mismatch"), said
    assert reason in said["message"], said["message"]
    assert "nothing was installed or run" in said["message"]
    assert "murmur-nb version" in said["message"]  # what to do
    assert said["left"] == [], said  # the half-made home released at once


@pytest.mark.parametrize(
    "how", ["a file through a link", "a file over a link", "a folder through a link up",
            "a name outside", "a name going up"],
)  # fmt: skip
def test_a_payload_writes_nothing_outside_the_workers_folder(
    how: str, only_root: Path, tmp_path: Path
) -> None:
    """A payload is data a worker receives: one whose link entry is followed by an entry
    inside it (or of its name), or whose module name is a path, had the worker write (as
    root, on a root worker) an executable wherever the link or the name pointed, a file of
    the victim's replaced. Every write now stays in the worker's folder: such a payload is
    refused before anything is written, naming the entry."""
    victim = only_root / "victim"
    victim.write_bytes(b"kept\n")
    temp = tmp_path / "tmp"
    script = b"#!/bin/sh\necho planted\n"
    name, entries, reason = {
        "a file through a link": ("m", (("lib", "L", False, str(only_root).encode()),
                                        ("lib/planted", "F", True, script)), "'lib/planted'"),
        "a file over a link": ("m", (("victim", "L", False, str(victim).encode()),
                                     ("victim", "F", True, script)), "'victim' twice"),
        "a folder through a link up": ("m", (("up", "L", False, b"../../.."),
                                             ("up/made", "D", False, b"")), "'up/made'"),
        "a name outside": (str(only_root / "m"), (("module", "F", True, script),),
                           "not a module id"),
        "a name going up": ("../../made", (("module", "F", True, script),), "not a module id"),
    }[how]  # fmt: skip
    said = _install_on_a_worker(name, entries, temp)
    # before: installed, with only_root/planted (or the victim) written, or temp/made made
    _refused_for(said, reason)
    assert sorted(p.name for p in only_root.iterdir()) == ["victim"]
    assert victim.read_bytes() == b"kept\n"
    assert list(temp.iterdir()) == []


@pytest.mark.parametrize(
    ("entries", "reason"),
    [
        ((("module", "X", True, b"x"),), "not (path, 'D' | 'F' | 'L', bool, bytes)"),
        ((("module", "F", True, "#!/bin/sh"),), "not (path, 'D' | 'F' | 'L', bool, bytes)"),
        ((("module", "F", True, b"x", "extra"),), "not (path, 'D' | 'F' | 'L', bool, bytes)"),
        ((("", "D", False, b""),), "not a relative path inside the module folder"),
        ((("a/./b", "F", False, b""),), "not a relative path inside the module folder"),
        ((("a\x00b", "F", False, b""),), "not a relative path inside the module folder"),
        ((("/etc/x", "F", False, b""),), "not a relative path inside the module folder"),
        ((("a", "F", False, b""), ("a/b", "F", False, b"")), "which it did not ship as a folder"),
        ((("a/b", "F", False, b""),), "which it did not ship as a folder"),
        ((("a", "D", False, b""), ("a", "D", False, b"")), "'a' twice"),
        ((("l", "L", False, b"\xff"),), "not a link target"),
        ((("l", "L", False, b""),), "not a link target"),
    ],
    ids=["kind", "text-data", "five-fields", "empty", "dot", "nul", "absolute", "under-a-file",
         "no-parent", "twice", "not-utf8", "empty-target"],
)  # fmt: skip
def test_a_malformed_payload_is_refused_naming_what_is_wrong(
    entries: tuple[Any, ...], reason: str, tmp_path: Path
) -> None:
    """A payload of the wrong shape (as a kernel of another version might send) failed the
    worker's task with whatever Python raised (``TypeError``, ``FileExistsError``, a file
    written for an unknown kind), its half-made folder kept until the worker exited; now
    it is a ``digest_mismatch`` row that says what is wrong and what to do."""
    _refused_for(_install_on_a_worker("m", entries, tmp_path / "tmp"), reason)


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "m\x00"])
def test_a_payload_named_no_module_is_refused(name: str, tmp_path: Path) -> None:
    """``..`` would be the worker's own folder, beside its lock file."""
    said = _install_on_a_worker(name, (("module", "F", True, b"x"),), tmp_path / "tmp")
    _refused_for(said, "not a module id")


def test_a_worker_checks_each_payloads_digest_also_after_one_of_the_same_files(
    host: mnb.ModuleHost, log_root: Path
) -> None:
    """Drives the worker task in this process (no cluster needed: the check is the task's
    own). Two kernels whose checks differ (another version, a ``describe`` that answers
    otherwise there) ship the same files under different module digests: a fresh worker
    refuses the one its own host does not hash to, but one that had installed the same files
    for the other kernel reused that host, its digest never compared, and ran the row."""
    from dataclasses import replace

    # private: the worker task and its hosts, driven as Dask would
    from murmur_nb._batch.cluster import close_worker_hosts, run_on_worker
    from murmur_nb._batch.payload import payload_of  # private: the module as shipped
    from murmur_nb._batch.plan import plan_for  # private: the payload's plan

    plan = plan_for(host, "batchy.work", poll_every=0.2, poll_timeout=60)
    good = payload_of(plan, host.policy)
    other = replace(good, module_digest="sha256:" + "1" * 64)  # the same files
    task = (host.policy, {"n": 3}, 1, {"approve": False}, (0.2, 60.0), 1 << 20, "here")
    try:
        first, _ = run_on_worker(good, *task)
        assert first["status"] == "ok" and runs(log_root, "work-3-*") != []
        # before: "ok", a second work-3-* file in the log root
        second, data = run_on_worker(other, *task)
        assert second["status"] == "not_run", second
        assert second["error"]["code"] == "digest_mismatch" and data == []
        assert "sha256:" + "1" * 64 in second["error"]["message"]
        assert len(runs(log_root)) == 1
        again, _ = run_on_worker(good, *task)  # the good one's host still serves it
        assert again["status"] == "ok" and len(runs(log_root)) == 2
        # a payload unfit to install is a row not run, saying why, not a failed task
        # (before: TypeError from hashing its text as bytes)
        unfit = replace(good, entries=(("module", "F", True, "#!/bin/sh"),))
        refused, _ = run_on_worker(unfit, *task)
        assert (refused["status"], refused["error"]["code"]) == ("not_run", "digest_mismatch")
        assert "not (path, 'D' | 'F' | 'L', bool, bytes)" in refused["error"]["message"]
    finally:
        close_worker_hosts()


#: a root Dask worker holding what a kernel shipped it (a module with its private
#: ``config.env``) until its standard input closes
HOLDER = """\
import sys
import murmur_nb as mnb
from murmur_nb._batch.payload import Payload, install
shipped = (("config.env", "F", False, b"TOKEN=s3cret\\n"), ("module", "F", True, b"#!/bin/sh\\n"))
print(install(Payload("m", "m.x", "sha256:" + "0" * 64, shipped), mnb.Policy()), flush=True)
sys.stdin.read()
"""

#: another root kernel on the machine: its module, given the temporary folder as its ``src``
#: root, reads ``argv[3]``; its runs folder is ``argv[4]`` (one in the temporary folder is
#: refused as a root's without a mount namespace, as in the default-Docker harness)
READER = """\
import json, sys
import murmur_nb as mnb
with mnb.ModuleHost(home=sys.argv[1], policy=mnb.Policy(roots={"src": sys.argv[2]}),
                    runs_dir=sys.argv[4]) as host:
    print(json.dumps(host.invoke("reacher.read", {"paths": [sys.argv[3]]}).result))
"""


@as_root
def test_another_kernels_module_reads_nothing_a_root_worker_was_shipped(
    reachable: Path, tmp_path: Path
) -> None:
    """A root kernel gives a module a root that holds the temporary folder (``/tmp``) while
    a root Dask worker of the machine keeps the modules it was shipped there: the module read
    another module's private ``config.env`` from the worker's folder (murmur-nb's own folders
    are carved out of every root, but a worker's was not counted as one)."""
    temp = reachable / "tmp"  # the machine's temporary folder, shared by both
    temp.mkdir(mode=0o755)
    home = tmp_path / "facet"
    install(home, "reacher", "reacher")
    env = {**os.environ, "TMPDIR": str(temp)}
    with subprocess.Popen([sys.executable, "-c", HOLDER], env=env, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as worker:  # fmt: skip
        assert worker.stdout is not None
        secret = Path(worker.stdout.readline().strip(), "modules", "m", "config.env")
        try:
            assert secret.read_text() == "TOKEN=s3cret\n"
            done = subprocess.run([sys.executable, "-c", READER, str(home), str(temp),
                                   str(secret), str(tmp_path / "runs")], env=env,
                                  capture_output=True, text=True, timeout=240,
                                  check=False)  # fmt: skip
        finally:
            worker.communicate(timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    # before: {"<worker>/modules/m/config.env": "TOKEN=s3cret\n"}
    assert seen[str(secret)].startswith("error:"), seen


@reruns_in_each_setting
def test_the_journal_and_worker_attacks_hold_as_a_user_and_in_a_container(
    user: bool, docker: bool
) -> None:
    """The attacks whose outcome hangs on who runs the kernel and where (another account's
    link in place of a journal, a payload writing out of a worker's folder, another kernel's
    module reading a worker's files), as an unprivileged user and inside the default-Docker
    harness; the rest of this file is about values, the same everywhere."""
    done, tail = rerun(["tests/test_hostile_batch.py"], user=user, docker=docker,
                       deselect="journal or payload or worker or another_kernels")  # fmt: skip
    assert done == 0, tail
    assert " passed" in tail and not re.search(r"\d+ failed", tail), tail
