"""Replay defects of the fourth user trial: a Dask frame or a frame indexed by context id as
the source, comparisons of partial and empty replays, and a Dask client closed before or
during a replay (real WAT guests over real records; a LocalCluster of its own per test)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _wat import assemble
from test_hook_replay import TWO_VERSIONS, capsule, talk, write

import murmur_nb as mnb

distributed = pytest.importorskip("distributed")


@pytest.fixture
def hooks(tmp_path: Path, murmur_home: Path) -> Iterator[mnb.HookHost]:
    """The two versions of the dropping guest over three plain records and one that traps."""
    write(murmur_home, "plain-a", talk(12))
    write(murmur_home, "plain-b", talk(30))
    write(murmur_home, "plain-c", talk(5))
    write(murmur_home, "x-trap", [("user", "!trap"), ("user", "more")])
    path = capsule(tmp_path / "capsule", TWO_VERSIONS, replay=assemble("replay.wat"))
    with mnb.HookHost.from_config(path, conversations=mnb.ConversationStore(murmur_home)) as host:
        yield host


def _comparable(frame: pd.DataFrame) -> pd.DataFrame:
    """A replay's rows without what differs between two runs of the same calls."""
    return frame.drop(columns=["duration_ms"]).reset_index(drop=True)


def test_a_dask_frame_replays_its_messages_as_the_pandas_frame_does(
    hooks: mnb.HookHost, murmur_home: Path
) -> None:
    """``replay(hooks, ddf)`` replayed the frame's column names as context ids (a Dask
    frame has no ``attrs`` and iterates over its columns), each an empty record."""
    lazy = mnb.read_conversations(murmur_home, engine="dask")
    eager = mnb.read_conversations(murmur_home, progress=False)
    out = mnb.replay(hooks, lazy, hooks="old", progress=False)
    want = mnb.replay(hooks, eager, hooks="old", progress=False)
    pd.testing.assert_frame_equal(_comparable(out), _comparable(want))
    assert sorted(set(out["context_id"])) == ["plain-a", "plain-b", "plain-c", "x-trap"]
    # a filtered Dask frame offers exactly the messages it keeps, as a pandas one does
    short = mnb.replay(hooks, lazy[lazy["position"] < 4], hooks="old", progress=False)
    compact = short[short["event"] == "compact"].set_index("context_id")["messages_in"]
    assert compact.to_dict() == {"plain-a": 4, "plain-b": 4, "plain-c": 4, "x-trap": 2}


def test_a_frame_indexed_by_context_id_replays_as_its_column_does(
    hooks: mnb.HookHost, murmur_home: Path
) -> None:
    """``frame.set_index("context_id")`` was refused: "this DataFrame has no context_id
    column"."""
    frame = mnb.read_conversations(murmur_home, progress=False)
    want = mnb.replay(hooks, frame, hooks="new", progress=False)
    for indexed in (frame.set_index("context_id"), frame.set_index(["context_id", "id"])):
        got = mnb.replay(hooks, indexed, hooks="new", progress=False)
        pd.testing.assert_frame_equal(_comparable(got), _comparable(want))
    lazy = mnb.read_conversations(murmur_home, engine="dask").set_index("context_id")
    got = mnb.replay(hooks, lazy, hooks="new", progress=False)
    pd.testing.assert_frame_equal(_comparable(got), _comparable(want))


def test_a_comparison_marks_a_missing_side_with_nullable_booleans(hooks: mnb.HookHost) -> None:
    """The ``ok_*`` columns of keys one side lacks were object columns holding ``nan``."""
    first = mnb.replay(hooks, ["plain-a", "plain-b"], hooks="old", progress=False)
    second = mnb.replay(hooks, ["plain-b", "plain-c"], hooks="old", progress=False)
    frame = mnb.compare_replays(first, second).frame
    for side in ("old (1)", "old (2)"):
        assert frame[f"ok_{side}"].dtype == pd.BooleanDtype(), frame.dtypes
    got = [
        (context, None if pd.isna(a) else bool(a), None if pd.isna(b) else bool(b))
        for context, a, b in zip(frame["context_id"], frame["ok_old (1)"], frame["ok_old (2)"],
                                 strict=True)
    ]  # fmt: skip
    want = [("plain-a", True, None), ("plain-b", True, True), ("plain-c", None, True)]
    assert got == [row for row in want for _ in ("task-start", "compact")]


def test_empty_replays_compare_as_an_empty_comparison(hooks: mnb.HookHost) -> None:
    """Two empty replays raised "the first replay has no rows of hook 'old' (it has [])"."""
    empty = mnb.replay(hooks, [], hooks="old", progress=False)
    assert empty.empty
    none = mnb.compare_replays(empty, empty.copy(), hooks=("old", "old"))
    assert none.frame.empty and none.differences.empty
    assert none.summary() == "old (1) vs old (2): 0 of 0 rows differ (nothing)"
    assert none.totals()["old (1)"]["calls"] == 0 and "0 of 0 rows differ" in none._repr_html_()
    run = mnb.replay(hooks, ["plain-c"], hooks="old", progress=False)
    one_sided = mnb.compare_replays(run, empty, hooks=("old", "old"))
    assert list(one_sided.frame["differs"]) == [["missing"], ["missing"]]
    assert one_sided.frame["ok_old (2)"].isna().all()
    assert "(no row)" in one_sided._repr_html_()
    with pytest.raises(ValueError, match="no rows of hook 'newest'"):
        mnb.compare_replays(run, empty, hooks=("newest", "old"))  # a run of other hooks


@contextlib.contextmanager
def own_cluster() -> Iterator[distributed.Client]:
    """Two worker processes of one thread, for this test only (its client gets closed)."""
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       security=True, dashboard_address="127.0.0.1:0")  # fmt: skip
    try:
        with distributed.Client(cluster) as client:
            yield client
    finally:
        cluster.close()


def finished_replay_tasks(dask_scheduler: Any) -> list[str]:
    """On the scheduler: the keys of the replay tasks that hold their result."""
    return [str(key) for key, task in dask_scheduler.tasks.items()
            if "replay_chunk" in str(key) and task.state == "memory"]  # fmt: skip


def close_after_a_task(client: distributed.Client, before: set[str]) -> None:
    """Close ``client`` half a second after a replay task not in ``before`` finished (time
    for the kernel to collect its rows), or after a minute."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and client.status == "running":
        if set(client.run_on_scheduler(finished_replay_tasks)) - before:
            time.sleep(0.5)
            break
        time.sleep(0.05)
    client.close()


@pytest.mark.slow
def test_a_client_closed_during_a_replay_keeps_the_finished_rows(
    tmp_path: Path, murmur_home: Path
) -> None:
    """The replay raised FutureCancelledError and lost every finished row; now the records
    that did not finish are ``worker_lost`` rows saying why, and a closed client is refused
    up front with a ValueError (it raised AttributeError 'NoneType' ... 'ncores')."""
    for i in range(30):  # each compaction spins to its 300 ms limit
        write(murmur_home, f"slow-{i:02d}", [("user", "!loop"), ("user", f"record {i}")])
    text = "hooks:\n  dropper:\n    component: hooks/replay.wasm\n    limits: {time_ms: 300}\n"
    path = capsule(tmp_path / "slow", text, replay=assemble("replay.wat"))
    store = mnb.ConversationStore(murmur_home)
    with mnb.HookHost.from_config(path, conversations=store) as host, own_cluster() as client:
        mnb.replay(host, "slow-00", client=client, progress=False)  # the workers load the hook
        before = set(client.run_on_scheduler(finished_replay_tasks))
        closer = threading.Thread(target=close_after_a_task, args=(client, before))
        closer.start()
        try:
            out = mnb.replay(host, "*", client=client, progress=False)
        finally:
            closer.join()
        assert client.status == "closed"
        with pytest.raises(ValueError, match=r"client= is closed: replay needs a running one"):
            mnb.replay(host, "slow-00", client=client, progress=False)
    finished = out[out["event"] == "task-start"]["context_id"]
    lost = out[out["code"] == "worker_lost"]
    assert len(finished) > 0 and len(lost) > 0, out["code"].value_counts(dropna=False)
    assert set(finished).isdisjoint(lost["context_id"])
    assert sorted([*finished, *lost["context_id"]]) == [f"slow-{i:02d}" for i in range(30)]
    assert set(out.loc[out["event"] == "compact", "code"]) == {"deadline_exceeded", "worker_lost"}
    assert lost["error"].str.contains("the Dask client closed before it finished").all()
    assert not lost["ok"].any() and out.attrs == {"interrupted": False, "records": 30}
