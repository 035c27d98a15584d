"""Defects of ``map`` a user trial met: the journal key, refused options, dtypes, Series, inf.

Each runs real fixture modules (tests/modules/batchy.py, plain.py), sandboxed, and counts
what ran by the files ``batchy`` drops into its ``log`` root, one per real run.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _modules import default_descriptor, journaled, write_descriptor

import murmur_nb as mnb

FACET_MODULES = [("batchy", "batchy"), ("plain", "plain")]


@pytest.fixture
def host(facet_home: Path, log_root: Path) -> mnb.ModuleHost:
    with mnb.ModuleHost(home=facet_home, policy=mnb.Policy(roots={"log": str(log_root)})) as h:
        yield h


def runs(log_root: Path) -> list[str]:
    return sorted(p.name for p in log_root.glob("work-*"))


# -- 1. the journal key holds the options that change a row's outcome ----------------------


def _sent(batch: mnb.Batch, i: int) -> dict[str, Any]:
    """The request row ``i``'s module received (``plain.echo`` answers with it)."""
    request: dict[str, Any] = batch[i].result["request"]
    return request


def test_a_row_journaled_under_other_options_runs_again_not_reported(
    host: mnb.ModuleHost, tmp_path: Path
) -> None:
    """``extra={"tag": "B"}`` over a journal of ``tag: A`` rows gave back the A results as
    ``from_journal``; so did a longer ``deadline_ms`` the rows that failed under a short one."""
    journal = tmp_path / "options.sqlite"
    inputs = [{"count": 1}, {"count": 2}]

    def echo(**options: Any) -> mnb.Batch:
        return host.map("plain.echo", inputs, journal=journal, progress=False, **options)

    first = echo(extra={"tag": "A"})
    assert [_sent(first, i)["tag"] for i in range(2)] == ["A", "A"]
    other = echo(extra={"tag": "B"})
    assert other.progress.from_journal == 0
    assert [_sent(other, i)["tag"] for i in range(2)] == ["B", "B"]
    # the same options again resume, whatever order extra's keys were given in
    same = echo(extra={"tag": "B"})
    assert same.progress.from_journal == 2 and _sent(same, 0)["tag"] == "B"
    assert echo(extra={"b": 1, "a": [1, 2]}).progress.from_journal == 0
    assert echo(extra={"a": [1, 2], "b": 1}).progress.from_journal == 2
    # each row's bounds too
    short = echo(deadline_ms=5_000)
    assert short.progress.from_journal == 0 and _sent(short, 0)["deadline_ms"] == 5_000
    longer = echo(deadline_ms=6_000)
    assert longer.progress.from_journal == 0 and _sent(longer, 1)["deadline_ms"] == 6_000
    assert echo(deadline_ms=6_000).progress.from_journal == 2
    bounded = echo(max_output_bytes=1 << 20)
    assert bounded.progress.from_journal == 0
    assert _sent(bounded, 0)["max_output_bytes"] == 1 << 20
    # no options (and an empty extra) are the rows journaled without any, as before
    plain = echo()
    assert plain.progress.from_journal == 0 and "tag" not in _sent(plain, 0)
    assert echo(extra={}).progress.from_journal == 2


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"deadline_ms": 0}, "deadline_ms must be a positive integer"),
        ({"deadline_ms": -5}, "deadline_ms must be a positive integer"),
        ({"deadline_ms": 1.5}, "deadline_ms must be a positive integer"),
        ({"deadline_ms": True}, "deadline_ms must be a positive integer"),
        ({"deadline_ms": 10**12}, "at most this host's bound of 86400000"),
        ({"max_output_bytes": 0}, "max_output_bytes must be a positive integer"),
        ({"extra": "tag=A"}, "extra for batchy.work must be a dict"),
        ({"extra": {"x": float("nan")}}, "extra is not JSON-serializable as strict JSON"),
    ],
)
def test_options_a_row_cannot_run_with_are_refused_before_anything_runs(
    host: mnb.ModuleHost, log_root: Path, tmp_path: Path, options: dict[str, Any], says: str
) -> None:
    """``deadline_ms=0`` ran the batch and journaled every row as a failed
    ``invalid_input``, which a later ``deadline_ms=5000`` then read back as its outcome."""
    journal = tmp_path / "refused.sqlite"
    with pytest.raises(ValueError, match=says) as info:
        host.map("batchy.work", [{"n": 1}, {"n": 2}], journal=journal, progress=False,
                 **options)  # fmt: skip
    assert "map()" in str(info.value) and "nothing was run" in str(info.value)
    assert runs(log_root) == [] and journaled(journal) == 0
    assert len(host.audit()) == 0


# -- 6. the batch's own numbers are checked like retries and backoff -----------------------


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"max_cost": float("nan")}, "max_cost must be a finite number, 0 or more"),
        ({"max_cost": -1}, "max_cost must be a finite number, 0 or more"),
        ({"max_cost": float("inf")}, "max_cost must be a finite number, 0 or more"),
        ({"max_cost": "5"}, "max_cost must be a finite number, 0 or more"),
        ({"max_cost": True}, "max_cost must be a finite number, 0 or more"),
        ({"estimated_cost": float("nan")}, "estimated_cost must be a finite number"),
        ({"estimated_cost": -2.0}, "estimated_cost must be a finite number"),
        ({"concurrency": 2.5}, "concurrency must be a whole number, 1 or more"),
        ({"concurrency": 0}, "concurrency must be a whole number, 1 or more"),
        ({"concurrency": True}, "concurrency must be a whole number, 1 or more"),
        ({"backoff": "1"}, "backoff must be 0 or more seconds"),
        ({"backoff": float("nan")}, "backoff must be 0 or more seconds"),
        ({"poll_every": -1}, "poll_every must be a finite number of seconds, 0 or more"),
        ({"poll_timeout": float("nan")}, "poll_timeout must be a number of seconds, more than"),
        ({"poll_timeout": 0}, "poll_timeout must be a number of seconds, more than"),
        ({"artifact_bytes": -1}, "artifact_bytes must be a whole number, 0 or more"),
    ],
)
def test_a_budget_or_concurrency_that_is_no_number_is_refused_naming_it(
    host: mnb.ModuleHost, log_root: Path, options: dict[str, Any], says: str
) -> None:
    """``max_cost=nan`` turned the budget off (every row ran), ``max_cost=-1`` let one row
    overspend it, and ``concurrency=2.5`` raised "'float' object cannot be interpreted as
    an integer" from a worker pool."""
    with pytest.raises(ValueError, match=says):
        host.map("batchy.work", [{"n": i, "cost": 1.0} for i in range(4)], journal=None,
                 progress=False, **options)  # fmt: skip
    assert runs(log_root) == []


def test_a_zero_budget_and_numpy_numbers_are_taken(host: mnb.ModuleHost, log_root: Path) -> None:
    inputs = [{"n": i, "cost": 1.0} for i in range(4)]
    none = host.map("batchy.work", inputs, journal=None, progress=False, max_cost=0,
                    estimated_cost=1.0)  # fmt: skip
    assert none.progress.not_run == 4 and runs(log_root) == []
    some = host.map("batchy.work", inputs, journal=None, progress=False,
                    max_cost=np.float64(2.0), concurrency=np.int64(1))  # fmt: skip
    assert some.progress.ok == 2 and some.progress.cost == 2


# -- 8. to_pandas keeps the input's dtypes and types results by the result schema ----------

#: batchy.work's answer ({"n", "square"}) typed by a result schema that names one property of
#: each scalar type (``label`` and ``even`` are never sent: always missing)
TYPED = {
    "type": "object",
    "properties": {
        "n": {"type": "integer"},
        "square": {"type": ["number", "null"]},
        "label": {"type": "string"},
        "even": {"type": "boolean"},
        "kind": {"enum": ["a", 1]},
    },
}


def test_to_pandas_keeps_input_dtypes_and_result_dtypes_follow_the_result_schema(
    host: mnb.ModuleHost, facet_home: Path
) -> None:
    """Input columns came back as ``object`` / ``str`` (``Int64``, ``category``,
    ``boolean`` lost), and a ``result_*`` column's dtype followed its values: ``object``
    when every row failed, ``Int64`` when one was ok, so a ``concat`` of two batches turned
    both into ``object``."""
    folder = facet_home / "modules" / "batchy"
    descriptor = default_descriptor(facet_home, "batchy")
    descriptor["result_schemas"]["square"] = TYPED
    write_descriptor(folder, descriptor)
    frame = pd.DataFrame({
        "n": pd.array([1, None, 3], dtype="Int64"),
        "fail_every": pd.array([1, 1, 2], dtype="Int64"),
        "tag": pd.Categorical(["x", "y", None]),
        "retryable": pd.array([True, None, False], dtype="boolean"),
        "sleep": np.array([0.0, 0.0, 0.0], dtype="float32"),
    }, index=pd.Index(["a", "b", "c"], name="key"))  # fmt: skip
    out = host.map("batchy.work", frame, on_invalid="skip", journal=None,
                   progress=False).to_pandas()  # fmt: skip
    assert list(out["status"]) == ["failed", "not_run", "ok"]  # b: n is required
    # "retryable" is an outcome column too: the input's is prefixed, and keeps its dtype
    given = out[["n", "fail_every", "tag", "input_retryable", "sleep"]]
    pd.testing.assert_frame_equal(given.rename(columns={"input_retryable": "retryable"}), frame)
    assert out["retryable"].dtype == "boolean"
    expected = {"result_n": "Int64", "result_square": "Float64", "result_label": "string",
                "result_even": "boolean", "result_kind": "object"}  # fmt: skip
    assert {c: str(t) for c, t in out.filter(like="result_").dtypes.items()} == expected
    assert out.loc["c", "result_square"] == 9.0 and out["result_label"].isna().all()
    # every row failed: the same dtypes, so batches concatenate without turning to object
    failed = host.map("batchy.work", [{"n": 2, "fail_every": 2}], journal=None,
                      progress=False).to_pandas()  # fmt: skip
    assert {c: str(t) for c, t in failed.filter(like="result_").dtypes.items()} == expected
    both = pd.concat([out, failed])
    assert {c: str(t) for c, t in both.filter(like="result_").dtypes.items()} == expected
    empty = host.map("batchy.work", frame.iloc[:0], journal=None, progress=False).to_pandas()
    assert empty.dtypes.to_dict() == out.dtypes.to_dict()


# -- 9. a Series ---------------------------------------------------------------------------


def test_a_series_of_dicts_keeps_its_labels_and_one_of_scalars_says_to_frame_it(
    host: mnb.ModuleHost, log_root: Path
) -> None:
    """A Series of dicts lost its index (rows came back 0, 1); a Series of scalars made every
    row an ``invalid_input`` ("1 is not of type 'object'") with no word on what to pass."""
    dicts = pd.Series([{"n": 1}, {"n": 2}], index=pd.Index(["x", "y"], name="key"))
    out = host.map("batchy.work", dicts, journal=None, progress=False).to_pandas()
    assert list(out.index) == ["x", "y"] and out.index.name == "key"
    assert list(out["result_square"]) == [1, 4] and list(out["n"]) == [1, 2]
    assert len(runs(log_root)) == 2
    column = pd.Series([3, 4], name="n", index=["x", "y"])
    with pytest.raises(TypeError) as info:
        host.map("batchy.work", column, journal=None, progress=False)
    said = str(info.value)
    assert "map() takes a DataFrame" in said and "dicts" in said
    assert "s.to_frame()" in said and "s.to_frame('n')" in said
    assert len(runs(log_root)) == 2  # nothing more ran
    with pytest.raises(TypeError, match=r"to_frame\('n'\)"):
        host.map("batchy.work", pd.Series([3, 4]), journal=None, progress=False)


# -- 12. a value JSON cannot carry is named with its column ---------------------------------


@pytest.mark.parametrize("bad", [math.inf, -math.inf, np.float32("inf")])
def test_an_infinite_cell_is_an_invalid_row_naming_its_column_and_the_fix(
    host: mnb.ModuleHost, log_root: Path, bad: Any
) -> None:
    """It said "input is not JSON: Out of range float values are not JSON compliant"."""
    frame = pd.DataFrame({"n": [1, 2], "sleep": [bad, 0.0]})
    out = host.map("batchy.work", frame, on_invalid="skip", journal=None,
                   progress=False).to_pandas()  # fmt: skip
    assert list(out["status"]) == ["not_run", "ok"]
    said = out["error_message"].iloc[0]
    assert "column 'sleep'" in said and "inf" in said and "replace" in said
    assert "Out of range" not in said
    with pytest.raises(mnb.InvalidInput, match=r"row 0: column 'sleep'"):
        host.map("batchy.work", frame, journal=None, progress=False)
    nested = host.map("batchy.work", [{"n": 3, "extra": {"w": [1.0, float(bad)]}},
                                      {"n": 4, "sleep": float("nan")}],
                      on_invalid="skip", journal=None, progress=False).to_pandas()  # fmt: skip
    assert list(nested["status"]) == ["not_run", "not_run"]
    assert "input['extra']['w'][1]" in nested["error_message"].iloc[0]
    assert "input['sleep']" in nested["error_message"].iloc[1]
    assert "NaN" in nested["error_message"].iloc[1]
    assert len(runs(log_root)) == 1
