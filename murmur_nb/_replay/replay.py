"""``replay``: drive a host's hooks over recorded conversations, here or on a Dask cluster.

A replay is a driver: it sits above :class:`~murmur_nb.HookHost` and uses only what any
caller may (``hooks``, ``conversations``, ``component_bytes``, ``task_start`` and
``compact`` with each record's own ``context_id``), so the host never imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from murmur_nb._progress import Progress
from murmur_nb._replay.run import DEFAULT_TASK_ID, check_task_id, hooks_for, replay_local
from murmur_nb._replay.sources import jobs_of
from murmur_nb._replay.windows import WindowSpec, as_windows

if TYPE_CHECKING:
    import pandas as pd

    from murmur_nb._hooks.host import HookHost

__all__ = ["replay"]


def replay(
    host: HookHost,
    source: Any = "*",
    *,
    windows: WindowSpec = "whole",
    hooks: Sequence[str] | str | None = None,
    client: Any = None,
    progress: Progress = "auto",
    task_id: str = DEFAULT_TASK_ID,
) -> pd.DataFrame:
    """Drive ``host``'s hooks over recorded conversations as the runtime would; one row per call.

    For each record: ``on-task-start`` with the record's context id (a hook holding the
    ``read`` grant pages through the real record), then ``on-compact`` on each window of
    the record's messages (its reads scoped to the same record). Nothing raises for a hook's
    failure: a trap, a deadline, a memory limit or an ``err`` is a row with its ``code``.

    Parameters
    ----------
    host : HookHost
        The hooks, as loaded (:meth:`murmur_nb.HookHost.from_config`), and the store whose
        records they read.
    source : str, list of str, ConversationStore, path or DataFrame
        A context id; a list of them (or a Series or array of them); ``"*"`` (the
        default), the store or its home path (a ``Path``, or a string naming the folder)
        for every record under the home; or a frame from :func:`murmur_nb.read_conversation`
        (its ``attrs`` name the record) or :func:`murmur_nb.read_conversations` (its
        ``context_id`` column or index does; a Dask frame is computed first, the columns a
        replay reads only), whose messages are the ones offered to ``compact``
        (with the frame's values: its ``created_at`` is the instant in UTC, written
        ``...Z``, not the record's text with its own offset; replay by id to offer the
        record's lines exactly).
    windows : "whole", int or ReplayWindows
        What ``compact`` is offered. ``"whole"`` (the default): the whole record once,
        which is what the runtime hands a hook at the end and costs one call per record.
        ``N``: the record as it grew, every ``N`` messages, then whole.
        :class:`~murmur_nb.ReplayWindows` also cuts a window each time the record's
        characters pass a threshold (``chars=``).
    hooks : str or list of str, optional
        Hook ids to drive (default: every hook of ``host``). Two ids (two versions of a
        hook, as two entries of ``murmur.yaml``) give a run to pass to
        :func:`murmur_nb.compare_replays`.
    client : dask.distributed.Client, optional
        Spread the records over the cluster's workers: each loads the hooks from the
        component bytes ``host`` loaded (:meth:`murmur_nb.HookHost.component_bytes`, not the
        files as they are now) with these limits and the kernel's bounds on compiling
        (``host.config.compile_bounds``), reads the records through a store of the
        same home, and a dead worker's records are run again. A worker's threads share one
        host; each call reads its own record.
    progress : "auto", bool
        A bar over records, by the library's one policy (a batch's too): with ``"auto"``
        (the default) a notebook bar in a Jupyter kernel, a text bar in a terminal, none
        when stderr is a pipe or a file; ``True`` always, ``False`` never.
    task_id : str
        The task id hooks see; ``{context_id}`` is replaced by the record's.

    Returns
    -------
    pandas.DataFrame
        One row per (record, hook, event, window): ``context_id``, ``hook_id``,
        ``event`` (category), ``window`` (the messages offered: the record's first
        ``window``; ``<NA>`` on ``task-start``), ``final`` (the whole record), ``ok``,
        ``code``, ``error``, ``duration_ms``, ``fuel_used``, ``note`` (the
        ``task-start`` answer), ``messages_in``/``chars_in``, ``messages_out``/
        ``chars_out``, ``kept_ratio`` (share of the offered messages kept, by id),
        ``roles_dropped`` (role -> messages dropped), ``first_system_kept``,
        ``last_user_kept`` (``<NA>`` without such a message), ``kept_ids``, ``new_ids``
        (returned messages that were not offered: a summary), ``output`` (the returned
        messages), ``stderr`` and ``worker`` (the Dask worker, or ``<NA>``).
        ``attrs["interrupted"]`` is ``True`` when Ctrl-C ended the replay early: the
        rows finished until then are all there. A record no Dask worker finished (its
        worker died on every retry, or the client closed during the replay) is one
        ``worker_lost`` row per hook, its ``error`` saying which.

    Raises
    ------
    TypeError
        ``host`` is not a :class:`~murmur_nb.HookHost` (a path of ``murmur.yaml`` is loaded
        with :meth:`~murmur_nb.HookHost.from_config` first).
    HookError
        ``unknown_hook``: ``hooks`` names a hook ``host`` does not have.
    ValueError
        ``client`` is closed (or closing): nothing was sent.

    Notes
    -----
    Named ``replay`` after what it does to the records (an offline re-run of the
    lifecycle, the word event-sourcing and agent-evaluation tools use); ``windows``
    follows pandas' window vocabulary (a growth window is an expanding window sampled
    at its ends), and ``client`` is the keyword Dask-aware libraries take.

    Examples
    --------
    >>> runs = mnb.replay(hooks, "*", windows=50, progress=False)  # doctest: +SKIP
    """
    from murmur_nb._hooks.host import HookHost  # noqa: PLC0415 - wasmtime loads on first use

    if not isinstance(host, HookHost):
        raise TypeError(
            f"replay() takes a HookHost, not {type(host).__name__}: load the hooks with "
            "mnb.HookHost.from_config('murmur.yaml', conversations=store) and pass that"
        )
    chosen = hooks_for(host, hooks)
    check_task_id(task_id)
    jobs = jobs_of(source, host.conversations)
    spec = as_windows(windows)
    if client is not None:
        from murmur_nb._replay.cluster import replay_on_cluster  # noqa: PLC0415 - the dask extra

        return replay_on_cluster(host, jobs, client, hooks=chosen, windows=spec,
                                 task_id=task_id, progress=progress)  # fmt: skip
    return replay_local(host, jobs, hooks=chosen, windows=spec, task_id=task_id,
                        progress=progress)  # fmt: skip
