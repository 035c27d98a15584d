"""Replaying records through hooks in this process: the lifecycle per record, progress, Ctrl-C.

Per record, as the runtime would drive it: ``on-task-start`` with the record's context id
(so a hook holding the ``read`` grant pages through the real record through the same store
and cursors as in production), then ``on-compact`` on each window of the record's messages.
A call's failure is its row (the host already turns traps, deadlines and limits into
results); an error reading a record is a row too (``record_unreadable``), for every hook.

Ctrl-C ends the replay at once: a call in progress is stopped by the host (its row is not
kept, it did not finish), every finished row is returned and ``frame.attrs["interrupted"]``
is ``True``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from murmur_nb._exceptions import ConversationReadError, HookError, InvalidContextId
from murmur_nb._hooks.host import chosen_hooks
from murmur_nb._progress import Progress
from murmur_nb._progress import progress_bar as policy_bar
from murmur_nb._replay.rows import compact_row, frame_of, start_row
from murmur_nb._replay.sources import RecordJob, record_messages
from murmur_nb._replay.windows import ReplayWindows

if TYPE_CHECKING:
    import pandas as pd

    from murmur_nb._conversations.store import Message
    from murmur_nb._hooks.host import HookHost

__all__ = [
    "DEFAULT_TASK_ID", "check_task_id", "hooks_for", "record_reach", "replay_job",
    "replay_local", "unreadable_rows",
]  # fmt: skip

#: The task id hooks see on ``task-start`` during a replay (``{context_id}`` is filled in).
DEFAULT_TASK_ID = "replay-{context_id}"


def check_task_id(task_id: str) -> None:
    """Refuse, before any hook runs, a task id template that names more than
    ``{context_id}`` (``str.format`` would raise on the first record)."""
    try:
        task_id.format(context_id="c")
    except (AttributeError, KeyError, IndexError, ValueError) as exc:
        raise ValueError(
            f"task_id={task_id!r} cannot be filled in ({type(exc).__name__}: {exc}): it is "
            "text in which {context_id} is replaced by the record's; write a literal brace "
            "twice ({{ or }})"
        ) from None


def hooks_for(host: HookHost, hooks: Sequence[str] | str | None) -> tuple[str, ...]:
    """The hook ids a replay drives: ``None`` for every configured hook, else those named
    (the hooks' own rule, :func:`~murmur_nb._hooks.host.chosen_hooks`); an empty list is
    refused too, since a replay of no hook makes no row."""
    wanted = chosen_hooks(tuple(host.hooks), hooks)
    if hooks is not None and not wanted:
        raise HookError(
            f"no hook given to replay; this HookHost has {', '.join(host.hooks) or 'none'} "
            "(ids from murmur.yaml's hooks:), or leave hooks= out for all of them",
            code="unknown_hook",
        )
    return wanted


def unreadable_rows(job: RecordJob, hooks: Sequence[str], exc: Exception, worker: str | None
                    ) -> list[dict[str, Any]]:  # fmt: skip
    code = getattr(exc, "code", None) or "record_unreadable"
    error = f"the record {job.context_id!r} could not be read for replay: {exc} ({code})"
    return [
        {"context_id": job.context_id, "hook_id": h, "event": "compact", "ok": False,
         "code": "record_unreadable", "error": error, "duration_ms": 0.0, "fuel_used": 0,
         "worker": worker}
        for h in hooks
    ]  # fmt: skip


def replay_job(
    host: HookHost,
    job: RecordJob,
    *,
    hooks: Sequence[str],
    windows: ReplayWindows,
    task_id: str,
    emit: Callable[[dict[str, Any]], None],
    worker: str | None = None,
) -> None:
    """Every call of one record; each finished row goes to ``emit`` as soon as it exists."""
    try:
        messages = (
            list(job.messages)
            if job.messages is not None
            else record_messages(host.conversations, job.context_id)
        )
    except (ConversationReadError, InvalidContextId, OSError) as exc:
        for row in unreadable_rows(job, hooks, exc, worker):
            emit(row)
        return
    ends = windows.ends(messages)
    whole, reach = record_reach(host.conversations, job, messages, ends)
    tid = task_id.format(context_id=job.context_id)
    started = host.task_start(task_id=tid, context_id=job.context_id, hooks=hooks, as_of=whole)
    for result in started.values():
        emit(start_row(job.context_id, result, worker))
    for end, as_of in zip(ends, reach, strict=True):
        window = messages[:end]
        called = host.compact(window, hooks=hooks, context_id=job.context_id, as_of=as_of)
        for result in called.values():
            emit(compact_row(job.context_id, result, window, final=end == ends[-1],
                             worker=worker))  # fmt: skip


def record_reach(
    conversations: Any, job: RecordJob, messages: Sequence[Message], ends: Sequence[int]
) -> tuple[int, list[int]]:
    """How much of the record the hooks may read: on ``task-start`` (the record as the replay
    read it), and at each window end (the record as it stood then: a hook never reads a
    message newer than its window, nor one appended since the replay read the record).

    A record read by id is ``messages``: a window of ``n`` is its first ``n``. A frame's
    messages may be a selection of the record's, so a window reaches as far into the record
    as its newest message found there (by id; none found: nothing).
    """
    if job.messages is None:
        return len(messages), list(ends)
    try:
        record = record_messages(conversations, job.context_id)
    except (ConversationReadError, InvalidContextId, OSError):
        record = []
    position = {m.id: i + 1 for i, m in enumerate(record)}
    reach, found = [], 0
    wanted = iter(ends)
    end = next(wanted, None)
    for n, message in enumerate(messages, start=1):
        found = max(found, position.get(message.id, 0))
        if n == end:
            reach.append(found)
            end = next(wanted, None)
    return found, reach


@contextlib.contextmanager
def progress_bar(total: int, progress: Progress, desc: str) -> Iterator[Any]:
    """The library's one progress policy (:mod:`murmur_nb._progress`): a notebook bar in a
    kernel, a text bar in a terminal, or none; closed when the block ends."""
    bar = policy_bar(total, desc=desc, unit="record", progress=progress)
    try:
        yield bar
    finally:
        if bar is not None:
            bar.close()


def replay_local(
    host: HookHost,
    jobs: Sequence[RecordJob],
    *,
    hooks: Sequence[str],
    windows: ReplayWindows,
    task_id: str,
    progress: Progress,
) -> pd.DataFrame:
    """Every job in this process, in order; Ctrl-C keeps the rows finished so far."""
    rows: list[dict[str, Any]] = []
    interrupted = False
    with progress_bar(len(jobs), progress, "replay") as bar:
        try:
            for job in jobs:
                replay_job(host, job, hooks=hooks, windows=windows, task_id=task_id,
                           emit=rows.append)  # fmt: skip
                if bar is not None:
                    bar.update(1)
        except KeyboardInterrupt:
            interrupted = True
            if bar is not None:
                bar.set_description("replay interrupted")
    return finish(rows, interrupted, len(jobs))


def finish(rows: list[dict[str, Any]], interrupted: bool, records: int) -> pd.DataFrame:
    frame = frame_of(rows)
    frame.attrs.update(interrupted=interrupted, records=records)
    return frame
