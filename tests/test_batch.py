"""ModuleHost.map over real fixture modules (tests/modules/batchy.py), run sandboxed."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _modules import journaled

import murmur_nb as mnb

FACET_MODULES = [("batchy", "batchy")]


@pytest.fixture
def host(facet_home: Path, log_root: Path, tmp_path: Path) -> mnb.ModuleHost:
    policy = mnb.Policy(roots={"log": str(log_root), "jobs": str(tmp_path / "jobs")})
    with mnb.ModuleHost(home=facet_home, policy=policy) as h:
        yield h


def runs(log_root: Path, name: str = "work") -> list[str]:
    return sorted(p.name for p in log_root.glob(f"{name}-*"))


def test_dataframe_in_dataframe_out_keeps_index_and_errors_as_rows(
    host: mnb.ModuleHost, log_root: Path
) -> None:
    df = pd.DataFrame({"n": range(12), "fail_every": 4, "tag": [None, *["t"] * 11]},
                      index=pd.Index([f"row{i}" for i in range(12)], name="key"))
    batch = host.map("batchy.work", df, concurrency=3, progress=False)
    out = batch.to_pandas()
    assert list(out.index) == list(df.index) and out.index.name == "key"
    assert out["ok"].dtype == "boolean"
    failed = out[~out["ok"]]
    assert list(failed.index) == ["row0", "row4", "row8"]
    assert set(failed["error_code"]) == {"bad_number"}
    assert out.loc["row5", "result_square"] == 25
    assert len(runs(log_root)) == 12
    # a NaN/None cell is left out of the input, not sent as null
    assert batch[0].request.input == {"n": 0, "fail_every": 4}
    assert "tag" in batch[1].request.input
    assert len(host.audit()) >= 12


def test_invalid_rows_are_refused_together_by_default(
    host: mnb.ModuleHost, log_root: Path
) -> None:
    inputs = [{"n": 1}, {"n": -1}, {"n": "x"}, {"n": 2}]
    with pytest.raises(mnb.InvalidInput) as info:
        host.map("batchy.work", inputs, progress=False)
    assert "row 1" in info.value.message and "row 2" in info.value.message
    assert runs(log_root) == []
    batch = host.map("batchy.work", inputs, on_invalid="skip", progress=False)
    out = batch.to_pandas()
    assert list(out["status"]) == ["ok", "not_run", "not_run", "ok"]
    assert list(out["error_code"].fillna("")) == ["", "invalid_input", "invalid_input", ""]
    assert len(runs(log_root)) == 2
    # the batch says once what to do; each row's problem no longer says "invoke again"
    assert "invoke again" not in info.value.message
    assert "on_invalid='skip'" in info.value.message
    assert not out["error_message"].fillna("").str.contains("invoke again").any()
    assert out.loc[1, "error_message"].startswith("input for batchy.work does not match")


def test_an_integer_column_with_a_missing_value_reaches_the_module_as_integers(
    host: mnb.ModuleHost, log_root: Path
) -> None:
    """pandas stores ``[1, 2, None]`` as floats: the module was sent ``{"n": 1.0}`` for the
    request schema's ``integer`` (a module reading it as an int fails: ``range(1.0)``), and
    the rows' journal keys differed from the same inputs given as a list."""
    frame = pd.DataFrame({"n": [1, 2, 3], "tries": [4, None, 6], "sleep": [0.0, 1e-3, 0.0]})
    assert frame["tries"].dtype == "float64"
    host.map("batchy.work", frame, progress=False)
    logged = {p.name.split("-")[1]: json.loads(p.read_text()) for p in log_root.glob("work-*")}
    assert logged == {"1": {"n": 1, "tries": 4, "sleep": 0.0}, "2": {"n": 2, "sleep": 0.001},
                      "3": {"n": 3, "tries": 6, "sleep": 0.0}}  # fmt: skip
    assert type(logged["1"]["tries"]) is int and type(logged["1"]["sleep"]) is float
    again = host.map("batchy.work", [{"n": 1, "tries": 4, "sleep": 0.0}], progress=False)
    assert again.to_pandas()["from_journal"].all() and len(runs(log_root)) == 3


def test_a_batch_row_is_taken_by_position_and_a_label_says_how(host: mnb.ModuleHost) -> None:
    """``batch["a"]`` raised "'<=' not supported between instances of 'int' and 'str'"."""
    frame = pd.DataFrame({"n": [1, 2, 3]}, index=["a", "b", "c"])
    batch = host.map("batchy.work", frame, progress=False)
    assert batch[1].request.input == {"n": 2} and batch[np.int64(-1)].request.input == {"n": 3}
    with pytest.raises(TypeError, match=re.escape("batch.to_pandas().loc['a']")) as info:
        batch["a"]  # type: ignore[index]
    assert "by position (0 to 2, as with iloc)" in str(info.value)
    with pytest.raises(TypeError, match="not by a float"):
        batch[1.0]  # type: ignore[index]


def test_a_lone_surrogate_is_that_rows_invalid_input_not_a_crash(
    host: mnb.ModuleHost, log_root: Path
) -> None:
    """Text with a lone surrogate is JSON to Python but not UTF-8: the row is refused as
    ``invoke`` refuses it, and the other rows run (it raised UnicodeEncodeError out of map,
    from the journal key's hash, and nothing ran)."""
    inputs = [{"n": 1}, {"n": 2, "tag": "a\udc80b"}, {"\ud800": 1}, {"n": 3}]
    with pytest.raises(mnb.InvalidInput) as info:
        host.map("batchy.work", inputs, progress=False)
    assert "row 1" in info.value.message and "row 2" in info.value.message
    assert "lone surrogate" in info.value.message and runs(log_root) == []
    batch = host.map("batchy.work", inputs, on_invalid="skip", progress=False)
    out = batch.to_pandas()
    assert list(out["status"]) == ["ok", "not_run", "not_run", "ok"]
    assert list(out["error_code"].fillna("")) == ["", "invalid_input", "invalid_input", ""]
    assert "'\\udc80', a lone surrogate" in out["error_message"].iloc[1]
    assert len(runs(log_root)) == 2
    frame = pd.DataFrame({"n": [4, 5], "tag": pd.Series(["ok", "\udfff"], dtype=object)})
    out = host.map("batchy.work", frame, on_invalid="skip", progress=False).to_pandas()
    assert list(out["status"]) == ["ok", "not_run"]
    assert len(runs(log_root)) == 3


def test_an_empty_batch_has_the_columns_and_dtypes_of_a_full_one(
    host: mnb.ModuleHost, log_root: Path
) -> None:
    """``out[out["ok"]]`` works on the frame of no rows too (it had no columns at all)."""
    frame = pd.DataFrame({"n": [1], "tag": ["t"]})
    full = host.map("batchy.work", frame, progress=False).to_pandas()
    empty = host.map("batchy.work", frame.iloc[:0], progress=False).to_pandas()
    assert len(empty) == 0 and len(full) == 1
    assert list(empty.columns) == list(full.columns)
    # a result column's type comes from the result schema, not its values: the same
    assert empty.dtypes.to_dict() == full.dtypes.to_dict()
    assert len(empty[empty["ok"]]) == 0
    listed = host.map("batchy.work", [], progress=False).to_pandas()
    assert len(listed) == 0 and list(listed.columns) == list(full.columns[2:])  # no input columns
    assert len(runs(log_root)) == 1


def test_a_journal_path_that_cannot_hold_one_is_refused_before_anything_runs(
    host: mnb.ModuleHost, log_root: Path, tmp_path: Path
) -> None:
    """A folder, or a file that is not SQLite, is named with the fix (they surfaced as
    sqlite3's "unable to open database file" / "file is not a database"), and the file is
    left as it was."""
    folder = tmp_path / "a-folder"
    folder.mkdir()
    with pytest.raises(ValueError, match=r"it is a folder.*journal=None"):
        host.map("batchy.work", [{"n": 1}], progress=False, journal=folder)
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"my notes, not a journal\n" * 100)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ValueError, match=r"cannot be used as a batch journal \(SQLite: file is"):
        host.map("batchy.work", [{"n": 1}], progress=False, journal=notes)
    assert notes.read_bytes() == b"my notes, not a journal\n" * 100
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no -wal, no -journal
    assert list(folder.iterdir()) == []
    with pytest.raises(ValueError, match="retries must be a whole number"):
        host.map("batchy.work", [{"n": 1}], progress=False, retries=-1)
    assert runs(log_root) == []


def test_resume_skips_journaled_rows_and_retry_failed(
    host: mnb.ModuleHost, log_root: Path
) -> None:
    inputs = [{"n": i, "fail_every": 5} for i in range(10)]
    first = host.map("batchy.work", inputs, progress=False)
    assert first.progress.failed == 2 and len(runs(log_root)) == 10
    again = host.map("batchy.work", inputs, progress=False)
    assert len(runs(log_root)) == 10  # nothing ran again
    assert again.to_pandas()["from_journal"].all()
    again.retry_failed()
    assert len(runs(log_root)) == 12  # only the two failed rows
    assert again.progress.failed == 2  # they fail the same way


def test_progress_counts_stay_true_through_twins_failures_resume_and_retry(
    host: mnb.ModuleHost, log_root: Path
) -> None:
    """The counts a view reads after every row are kept as rows move (not recounted over
    all rows each time): at every notification they equal a recount of the rows' states."""
    inputs = [{"n": i % 7, "fail_every": 3} for i in range(20)]  # repeated inputs, failures
    checked: list[mnb.BatchProgress] = []

    def watching(batch: mnb.Batch) -> None:
        def check(p: mnb.BatchProgress) -> None:
            states = [batch.status(i) for i in range(len(batch))]
            counted = {s: states.count(s) for s in ("ok", "failed", "running", "not_run")}
            assert (p.ok, p.failed, p.running, p.not_run) == (
                counted["ok"], counted["failed"], counted["running"], counted["not_run"])
            assert p.total == 20
            checked.append(p)
        batch.on_change(check)

    first = host.map("batchy.work", inputs, progress=False, background=True, concurrency=3)
    watching(first)
    first.wait()
    assert (first.progress.ok, first.progress.failed) == (12, 8)  # n in (0, 3, 6) fails
    again = host.map("batchy.work", inputs, progress=False)
    assert again.progress.from_journal == 20 == int(again.to_pandas()["from_journal"].sum())
    watching(again)
    again.retry_failed()
    p = again.progress
    assert (p.ok, p.failed, p.running, p.not_run) == (12, 8, 0, 0)
    assert p.from_journal == 12 == int(again.to_pandas()["from_journal"].sum())
    assert len(checked) > 3 and checked[-1].running == 0
    assert len(runs(log_root)) == 7 + 3  # each distinct input once, then the failed ones


def test_to_pandas_reads_the_journal_in_chunks_not_a_query_per_row(
    host: mnb.ModuleHost, log_root: Path
) -> None:
    """1,200 rows (three distinct inputs, so three real runs) read back with a few SQLite
    queries, one per ``READ_CHUNK`` rows, not 1,200. The journal's connection is an internal
    (``journal._db``): its statement trace is the only way to count the queries."""
    inputs = [{"n": i % 3} for i in range(1200)]
    batch = host.map("batchy.work", inputs, progress=False)
    assert len(runs(log_root)) == 3
    selects: list[str] = []
    batch.journal._db.set_trace_callback(
        lambda sql: selects.append(sql) if sql.lstrip().upper().startswith("SELECT") else None
    )
    out = batch.to_pandas()
    assert list(out["result_square"][:4]) == [0, 1, 4, 0] and out["ok"].all()
    assert len(out) == 1200
    assert 1 <= len(selects) <= 3, f"{len(selects)} queries for 1,200 rows"
    assert sum(1 for _ in batch) == 1200


def test_code_change_voids_the_journal(
    host: mnb.ModuleHost, facet_home: Path, log_root: Path
) -> None:
    inputs = [{"n": i} for i in range(4)]
    host.map("batchy.work", inputs, progress=False)
    exe = facet_home / "modules" / "batchy" / "module"
    exe.write_text(exe.read_text() + "\n# changed\n")
    again = host.map("batchy.work", inputs, progress=False)
    assert not again.to_pandas()["from_journal"].any()
    assert len(runs(log_root)) == 8


def edited_mid_batch(
    host: mnb.ModuleHost, facet_home: Path, log_root: Path, edit: Callable[[str], str]
) -> pd.DataFrame:
    """Run 24 rows, rewrite the module's file with ``edit`` once 3 are ok, and return the
    outcome after checking what holds either way: every row is ok or ``module_changed``,
    only ok rows ran, and the audit counts each refused row."""
    inputs = [{"n": i, "sleep": 0.2} for i in range(24)]
    batch = host.map("batchy.work", inputs, concurrency=2, background=True, progress=False,
                     journal=None)  # fmt: skip
    while batch.progress.ok < 3:
        time.sleep(0.02)
    exe = facet_home / "modules" / "batchy" / "module"
    exe.write_text(edit(exe.read_text()))
    batch.wait(60)
    out = batch.to_pandas()
    failed = out[out["status"] == "failed"]
    assert set(out["status"]) == {"ok", "not_run"}, failed["error_message"].head(2).tolist()
    changed = out[out["status"] == "not_run"]
    assert len(changed) >= 10 and set(changed["error_code"]) == {"module_changed"}
    assert "run map() again" in changed["error_message"].iloc[-1]
    assert len(runs(log_root)) == int(out["ok"].sum())
    assert (host.audit()["outcome"] == "module_changed").sum() == len(changed)
    return changed


def test_rows_look_at_the_live_module_at_most_every_tenth_of_a_second(
    host: mnb.ModuleHost, log_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A look is a ``stat`` walk of the module's folder (``PreparedCall.changed``), an eighth
    of the host's CPU per row when every row looked: the rows share one look per 0.1 s."""
    looks: list[float] = []
    changed = mnb.PreparedCall.changed

    def counted(self: mnb.PreparedCall) -> str | None:
        looks.append(time.monotonic())
        return changed(self)

    monkeypatch.setattr(mnb.PreparedCall, "changed", counted)
    t0 = time.monotonic()
    batch = host.map("batchy.work", [{"n": i} for i in range(60)], concurrency=4,
                     progress=False, journal=None)  # fmt: skip
    elapsed = time.monotonic() - t0
    assert batch.progress.ok == 60 and len(runs(log_root)) == 60
    assert 1 <= len(looks) <= elapsed / 0.1 + 4 and len(looks) < 60, (len(looks), elapsed)


def test_module_changed_mid_batch_runs_no_row_of_the_new_code(
    host: mnb.ModuleHost, facet_home: Path, log_root: Path
) -> None:
    # the new code would leave "changed-*" files where the approved code leaves "work-*"
    def edit(code: str) -> str:
        return code.replace('f"{name}-{n}-{rid}"', 'f"changed-{n}-{rid}"')

    edited_mid_batch(host, facet_home, log_root, edit)
    assert list(log_root.glob("changed-*")) == []


def test_module_broken_mid_batch_leaves_its_rows_not_run_not_failed(
    host: mnb.ModuleHost, facet_home: Path, log_root: Path
) -> None:
    # what a row resolving the module sees while an editor rewrites it: a half-written file
    changed = edited_mid_batch(host, facet_home, log_root, lambda code: code[:200])
    assert "describe" in changed["error_message"].iloc[-1]


def test_retries_with_backoff(host: mnb.ModuleHost, log_root: Path) -> None:
    inputs = [{"n": i, "tries": 2} for i in range(3)]
    no = host.map("batchy.flaky", inputs, progress=False, journal=None)
    assert no.progress.failed == 3
    for p in log_root.iterdir():
        p.unlink()
    yes = host.map("batchy.flaky", inputs, retries=3, backoff=0.05, progress=False,
                   journal=None)
    out = yes.to_pandas()
    assert out["ok"].all() and list(out["attempts"]) == [3, 3, 3]


def test_one_approval_and_max_cost(host: mnb.ModuleHost, log_root: Path) -> None:
    inputs = [{"n": i, "cost": 1.0} for i in range(10)]
    with pytest.raises(mnb.ApprovalRequired) as info:
        host.map("batchy.paid", inputs, estimated_cost=1.0, progress=False)
    assert "10 x 1 = 10" in info.value.message and runs(log_root, "paid") == []
    batch = host.map("batchy.paid", inputs, approve=True, max_cost=4.5, concurrency=2,
                     progress=False)
    p = batch.progress
    assert p.cost <= 4.5 and p.ok == 4
    out = batch.to_pandas()
    assert set(out[out["status"] == "not_run"]["error_code"]) == {"max_cost"}
    assert len(runs(log_root, "paid")) == 4


def test_unknown_cost_stops_a_capped_batch(host: mnb.ModuleHost, log_root: Path) -> None:
    inputs = [{"n": i, "cost": -1} for i in range(5)]
    batch = host.map("batchy.paid", inputs, approve=True, max_cost=100, progress=False)
    assert batch.progress.ok == 1 and len(runs(log_root, "paid")) == 1
    assert set(batch.to_pandas()["error_code"].dropna()) == {"cost_unknown"}


def test_long_running_rows(host: mnb.ModuleHost) -> None:
    batch = host.map("batchy.start", [{"n": i} for i in range(4)], poll_every=0.01,
                     progress=False, journal=None)
    out = batch.to_pandas()
    assert out["ok"].all()
    assert [r["square"] for r in out["result"]] == [0, 1, 4, 9]
    assert list(out["actual_cost"]) == [1.5] * 4  # start (0) + three polls (0.5 each)


def test_artifacts_are_stored_and_render(host: mnb.ModuleHost) -> None:
    batch = host.map("batchy.image", [{"n": i} for i in range(3)], progress=False)
    inv = batch[2]
    assert inv.artifacts and inv.artifacts[0].file.is_file()
    assert str(inv.artifacts[0].file).startswith(str(host.store.root))
    shown = mnb.render(inv).text
    assert "1 artifact" in shown and "embedded" in shown
    grid = batch.grid()
    assert grid.html.count("<img") >= 3


def test_cancel_keeps_finished_rows(host: mnb.ModuleHost, log_root: Path) -> None:
    inputs = [{"n": i, "sleep": 0.3} for i in range(20)]
    batch = host.map("batchy.work", inputs, concurrency=2, background=True, progress=False)
    while batch.progress.ok < 3:
        time.sleep(0.05)
    batch.cancel()
    batch.wait(60)
    p = batch.progress
    assert p.state == "cancelled" and p.ok >= 3 and p.not_run > 0
    # its text says so: "4/20 finished: ... 16 not run" read like a batch still starting
    assert repr(batch).startswith(f"Batch batchy.work: cancelled, {p.finished}/20 finished: ")
    again = host.map("batchy.work", inputs, concurrency=2, progress=False)
    assert again.progress.from_journal == p.ok and again.progress.ok == 20


def test_a_failure_of_the_host_stops_the_batch_and_wait_raises_it(
    host: mnb.ModuleHost, log_root: Path
) -> None:
    """A listener that raises is a failure of the host's side (as a journal that cannot be
    written would be): rows stop starting, none is left running, wait() raises it."""
    inputs = [{"n": i, "sleep": 0.3} for i in range(16)]
    batch = host.map("batchy.work", inputs, concurrency=2, background=True, progress=False)

    def broken(p: mnb.BatchProgress) -> None:
        if p.ok >= 2:
            raise RuntimeError("the listener's own bug")

    batch.on_change(broken)
    with pytest.raises(RuntimeError, match="the listener's own bug"):
        batch.wait(60)
    p = batch.progress
    # stopped, not finished: the rows left never ran
    assert p.state == "stopped" and p.running == 0 and p.ok >= 2 and p.not_run > 0
    assert repr(batch).startswith("Batch batchy.work: stopped, ")
    codes = {batch[i].error.code for i in range(16) if batch.status(i) == "not_run"}
    assert codes == {"host_error"}
    ran = runs(log_root)
    assert len(ran) == p.ok + p.failed < 16  # the rows not run never started a module
    time.sleep(1.0)
    assert runs(log_root) == ran  # and nothing starts later


_CHILD = """
import sys
sys.path.insert(0, {tests!r})
import murmur_nb as mnb
policy = mnb.Policy(roots={{"log": {log!r}}})
with mnb.ModuleHost(home={home!r}, policy=policy) as host:
    b = host.map("batchy.work", [{{"n": i, "sleep": 0.4}} for i in range(24)],
                 concurrency=2, progress=False)
    print(b.progress.from_journal, b.progress.ok, flush=True)
"""


@pytest.mark.slow
def test_kernel_killed_mid_batch_resumes(
    facet_home: Path, log_root: Path, tmp_path: Path
) -> None:
    code = _CHILD.format(tests=str(Path(__file__).parent), log=str(log_root),
                         home=str(facet_home))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    journal = facet_home / "batches" / "journal.sqlite"
    with subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                          text=True) as child:
        try:
            deadline = time.monotonic() + 120
            while journaled(journal) < 5 and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            os.kill(child.pid, signal.SIGKILL)
    kept = journaled(journal)
    assert 5 <= kept < 24
    again = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=300, check=True)
    from_journal, ok = map(int, again.stdout.split())
    assert from_journal == kept and ok == 24
