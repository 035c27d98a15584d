"""Replay on a Dask cluster: ``murmur_nb.replay(hooks, ..., client=dask.distributed.Client)``.

Design notes
------------
* **Each worker loads the hooks itself, from the bytes the kernel loaded.** The kernel ships
  one :class:`Payload` (scattered with ``broadcast``: it reaches each worker once): every
  hook's component bytes as the kernel's host loaded and checked them
  (:meth:`~murmur_nb.HookHost.component_bytes`, never the file as it is on disk now: a
  component rebuilt or swapped since ``from_config`` is not what the kernel checked) and
  their SHA-256, its events, grant and the very limits of the kernel's ``murmur.yaml``, the
  kernel's bounds on compiling (``HookConfig.compile_bounds``: a worker's own
  ``$MURMUR_NB_HOOK_MAX_LOCALS``, ``$MURMUR_NB_HOOK_COMPILE_S`` and
  ``$MURMUR_NB_HOOK_COMPILE_MB`` are not the kernel's, and a hook the kernel loaded under a
  raised bound was ``load_failed`` on workers that kept the default), and the murmur home.
  On first use in a worker process :func:`worker_host` checks each hook's digest, writes
  the bytes into a private folder and builds a :class:`~murmur_nb.HookHost` over them,
  which loads each component through the process's compiled-component cache: an entry is
  used only when its seal checks out under the user's cache key, exactly as in the kernel
  (else it is recompiled). A hook whose bytes do not hash to the digest the kernel
  sent is refused before anything of it is written or compiled: its rows are
  ``digest_mismatch``. A hook the kernel did not load is not shipped: its rows carry the
  kernel's ``load_error`` and code, as a local replay's do.
* **Each worker reads records through a store of the same home**, page by page with the
  cursor rules, as the kernel would; hooks with the ``read`` grant read the record through
  it too. Records given as a DataFrame travel with their messages.
* **Records go as tasks of a few records** (a task costs scheduler round trips). A worker
  that dies costs only the tasks it held: Dask reschedules them on the others, and a task
  that still fails because its worker was lost is submitted again (up to
  :data:`LOST_WORKER_RETRIES` times) before its records become ``worker_lost`` rows.
* Ctrl-C in the kernel cancels the tasks not finished and returns the finished rows.
* A task Dask cancels (the client closed during the replay, or the payload went with every
  worker that held it) gives ``worker_lost`` rows for its records, never an exception: the
  rows finished before are returned. A client already closed is refused with a
  ``ValueError`` before anything is sent (it failed deep inside Dask's ``nthreads()``).
"""

from __future__ import annotations

import hashlib
import math
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from murmur_nb._conversations.store import ConversationStore
from murmur_nb._exceptions import warn_if_plain_cluster
from murmur_nb._files.scratch import process_folder
from murmur_nb._hooks.config import CompileBounds, HookConfig, HookEntry, HookLimits
from murmur_nb._hooks.host import HookHost
from murmur_nb._progress import Progress
from murmur_nb._replay.run import finish, progress_bar, replay_job, unreadable_rows
from murmur_nb._replay.sources import RecordJob
from murmur_nb._replay.windows import ReplayWindows

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "LOST_WORKER_RETRIES",
    "Payload",
    "ShippedHook",
    "TaskCancelled",
    "check_client",
    "payload_of",
    "replay_chunk",
    "replay_on_cluster",
    "worker_host",
]

#: how often a task whose worker died is submitted again before its records are lost rows
LOST_WORKER_RETRIES = 3
#: the most records one task carries
MAX_CHUNK = 16


@dataclass(frozen=True)
class ShippedHook:
    """One hook as a worker receives it: the component's bytes and its configuration.

    A hook the kernel did not load carries no bytes, and ``not_loaded`` (its code, error).
    """

    id: str
    digest: str
    data: bytes
    events: tuple[str, ...]
    read_granted: bool
    limits: dict[str, Any]
    not_loaded: tuple[str, str] | None = None


@dataclass(frozen=True)
class Payload:
    """Everything a worker needs to host the kernel's hooks over the same records."""

    hooks: tuple[ShippedHook, ...]
    transport: str
    home: str
    bounds: CompileBounds

    @property
    def key(self) -> str:
        parts = [self.transport, self.home, repr(self.bounds)]
        parts += [f"{h.id}:{h.digest}:{h.events}:{h.read_granted}:{sorted(h.limits.items())}"
                  for h in self.hooks]  # fmt: skip
        return hashlib.sha256("|".join(parts).encode()).hexdigest()


def payload_of(host: HookHost, hooks: tuple[str, ...]) -> Payload:
    """The kernel's hooks, as loaded: the bytes its host compiled and checked, and their
    digest (never the component file as it is now)."""
    shipped = []
    for entry in host.config.hooks:
        if entry.id not in hooks:
            continue
        info, data = host.hooks[entry.id], host.component_bytes(entry.id)
        not_loaded = None
        if data is None or info.digest is None:
            data, not_loaded = b"", (info.load_code or "load_failed", info.load_error or "")
        shipped.append(ShippedHook(
            entry.id, info.digest or "", data, entry.events, entry.read_granted,
            entry.limits.model_dump(), not_loaded,
        ))  # fmt: skip
    home = getattr(host.conversations, "home", None)
    if home is None:
        raise ValueError(
            "replay(client=...) needs the HookHost's conversations to be a ConversationStore "
            "(workers open a store of the same home)"
        )
    return Payload(tuple(shipped), host.config.transport, str(home), host.config.compile_bounds)


# -- on the worker -------------------------------------------------------------------------

_hosts: dict[str, tuple[HookHost, dict[str, str]]] = {}
_hosts_lock = threading.Lock()


def _entry(hook: ShippedHook, folder: Path) -> HookEntry | str:
    """This worker's entry for ``hook``, or why it is refused (then nothing of it is written,
    so nothing of it can be compiled)."""
    if hook.not_loaded is not None:  # a path that never exists: it fails here as it did there
        path = folder / "not-loaded" / f"{hook.id}.wasm"
    elif hashlib.sha256(hook.data).hexdigest() != hook.digest:
        return (
            f"the component of hook {hook.id!r} as received does not hash to {hook.digest}, "
            "the digest of the bytes the kernel loaded; it was neither written nor compiled here"
        )
    else:
        path = folder / f"{hook.digest}.wasm"
        path.write_bytes(hook.data)
    return HookEntry(id=hook.id, component=path, events=hook.events,
                     read_granted=hook.read_granted, limits=HookLimits(**hook.limits))  # fmt: skip


def worker_host(payload: Payload) -> tuple[HookHost, dict[str, str]]:
    """This process's host for ``payload`` and the hooks it refused (id -> why), made once."""
    with _hosts_lock:
        if payload.key in _hosts:
            return _hosts[payload.key]
        folder = process_folder("murmur-nb-replay-")  # a killed worker's goes with the next
        entries, refused = [], {}
        for hook in payload.hooks:
            made = _entry(hook, folder)
            if isinstance(made, str):
                refused[hook.id] = made
            else:
                entries.append(made)
        config = HookConfig(path=None, transport=payload.transport, default_limits=HookLimits(),
                            hooks=tuple(entries), compile_bounds=payload.bounds)  # fmt: skip
        host = HookHost(config, conversations=ConversationStore(payload.home))
        for hook in payload.hooks:  # what this worker compiled is what the kernel loaded
            info = host.hooks.get(hook.id)
            if info is not None and info.loaded and info.digest != hook.digest:
                refused[hook.id] = (
                    f"the component of hook {hook.id!r} loaded here hashes to {info.digest}, not "
                    f"to {hook.digest}, the digest of the bytes the kernel loaded; it did not run"
                )
        _hosts[payload.key] = (host, refused)
        return host, refused


def loaded_from() -> dict[str, dict[str, str | None]]:
    """Per payload on this worker: hook id -> where its compiled component came from."""
    return {key: {h: i.loaded_from for h, i in host.hooks.items()}
            for key, (host, _) in _hosts.items()}  # fmt: skip


def _refused_rows(job: RecordJob, refused: dict[str, str], worker: str) -> list[dict[str, Any]]:
    return [
        {"context_id": job.context_id, "hook_id": h, "event": "compact", "ok": False,
         "code": "digest_mismatch", "error": why, "duration_ms": 0.0, "fuel_used": 0,
         "worker": worker}
        for h, why in refused.items()
    ]  # fmt: skip


def replay_chunk(
    payload: Payload, jobs: list[RecordJob], hooks: tuple[str, ...], windows: ReplayWindows,
    task_id: str,
) -> list[dict[str, Any]]:  # fmt: skip
    """A few records on a worker, one after the other (a Dask task): their rows."""
    from distributed import get_worker  # noqa: PLC0415 - only ever runs on a worker

    worker = get_worker().address
    host, refused = worker_host(payload)
    usable = tuple(h for h in hooks if h not in refused)
    kernel = {h.id: h.not_loaded for h in payload.hooks if h.not_loaded is not None}
    rows: list[dict[str, Any]] = []

    def emit(row: dict[str, Any]) -> None:
        if row["hook_id"] in kernel:  # the kernel's load error, not the stand-in's
            row.update(zip(("code", "error"), kernel[row["hook_id"]], strict=True))
        rows.append(row)

    for job in jobs:
        rows += _refused_rows(job, refused, worker)
        if usable:
            replay_job(host, job, hooks=usable, windows=windows, task_id=task_id,
                       emit=emit, worker=worker)  # fmt: skip
    return rows


# -- in the kernel -------------------------------------------------------------------------


def _lost(exc: BaseException | None) -> bool:
    from distributed import KilledWorker  # noqa: PLC0415

    return isinstance(exc, KilledWorker | OSError)  # CommClosedError is an OSError


def _running(client: Any) -> bool:
    return getattr(client, "status", "running") not in {"closing", "closed"}


def check_client(client: Any) -> None:
    """Refuse a client that can no longer run anything, before any work is sent."""
    if not _running(client):
        raise ValueError(
            f"the Dask client given as client= is {client.status}: replay needs a running "
            "one (distributed.Client(cluster)), or leave client= out to replay in this process"
        )


def _chunks(jobs: list[RecordJob], slots: int) -> list[list[RecordJob]]:
    size = max(1, min(MAX_CHUNK, math.ceil(len(jobs) / (slots * 4))))
    return [jobs[i : i + size] for i in range(0, len(jobs), size)]


class _Run:
    """The tasks of one replay: submitted, resubmitted after a lost worker, collected."""

    def __init__(self, client: Any, payload: Any, args: tuple[Any, ...]) -> None:
        self.client, self.payload, self.args = client, payload, args
        self.tries: dict[Any, tuple[int, int]] = {}  # future -> (chunk index, losses)

    def submit(self, index: int, chunk: list[RecordJob], losses: int) -> Any:
        fut = self.client.submit(replay_chunk, self.payload, chunk, *self.args, pure=False)
        self.tries[fut] = (index, losses)
        return fut


def replay_on_cluster(
    host: HookHost,
    jobs: list[RecordJob],
    client: Any,
    *,
    hooks: tuple[str, ...],
    windows: ReplayWindows,
    task_id: str,
    progress: Progress,
) -> pd.DataFrame:
    """The records spread over the cluster's workers; rows in the order of the records."""
    from distributed import as_completed  # noqa: PLC0415 - the dask extra

    completed: Any = as_completed  # untyped

    check_client(client)
    warn_if_plain_cluster(client)
    slots = max(1, sum(int(n) for n in client.nthreads().values()))
    chunks = _chunks(jobs, slots)
    # a key of its own (hash=False), as the batch does: a content key shared with an earlier
    # replay of the same hooks races that replay's release ("lost dependencies")
    payload = client.scatter(payload_of(host, hooks), broadcast=True, hash=False)
    run = _Run(client, payload, (hooks, windows, task_id))
    done: dict[int, list[dict[str, Any]]] = {}
    interrupted = False
    with progress_bar(len(jobs), progress, "replay on cluster") as bar:
        pending = completed([run.submit(i, c, 0) for i, c in enumerate(chunks)])
        try:
            for fut in pending:
                index, losses = run.tries.pop(fut)
                got = _outcome(fut, client)
                if isinstance(got, Exception):
                    if _lost(got) and losses < LOST_WORKER_RETRIES and _running(client):
                        pending.add(run.submit(index, chunks[index], losses + 1))
                        continue
                    got = _failed(got, chunks[index], hooks)
                done[index] = got
                if bar is not None:
                    bar.update(len(chunks[index]))
        except KeyboardInterrupt:
            interrupted = True
            client.cancel(list(run.tries))
    rows = [row for i in sorted(done) for row in done[i]]
    return finish(rows, interrupted, len(jobs))


class TaskCancelled(Exception):
    """A replay task Dask cancelled, not the replay: the client closed, or the payload went
    with every worker that held it. Its records did not run; they are ``worker_lost`` rows."""


def _outcome(fut: Any, client: Any) -> list[dict[str, Any]] | Exception:
    """A finished task's rows, or why there are none (fetching them can fail as well: the
    result went with its worker, or the client closed since)."""
    try:
        if fut.status == "finished":
            rows: list[dict[str, Any]] = fut.result()
            return rows
        if fut.status == "error":
            exc: Exception = fut.exception()
            return exc
    except Exception as failure:  # the result is out of reach: the task's failure
        if _running(client):
            return failure
    if not _running(client):
        return TaskCancelled("the Dask client closed before it finished")
    return TaskCancelled("Dask cancelled it (its payload was lost with the workers that held it)")


def _failed(exc: Exception, chunk: list[RecordJob], hooks: tuple[str, ...]
            ) -> list[dict[str, Any]]:  # fmt: skip
    """The rows of a task that gave none, one per record and hook: ``worker_lost`` when the
    task went with its worker or was cancelled, else ``host_error``."""
    cancelled = isinstance(exc, TaskCancelled)
    code = "worker_lost" if cancelled or _lost(exc) else "host_error"
    out = []
    for job in chunk:
        error = (
            f"the task replaying {job.context_id!r} did not run to its end: {exc}; replay the "
            "record again with a running client" if cancelled else
            f"the task replaying {job.context_id!r} failed on the cluster: "
            f"{type(exc).__name__}: {exc}"
        )  # fmt: skip
        for row in unreadable_rows(job, hooks, exc, None):
            row.update(code=code, error=error)
            out.append(row)
    return out
