"""A complete demo home on disk: modules, artifact store, conversation record, murmur.yaml.

The tutorials and the README's main command run on this folder, so it must be complete and it
must be cheap to ask for again. :func:`prepare_demo_home` is therefore idempotent: every file is
rewritten only when its bytes differ, under an exclusive lock so two kernels preparing the same
folder at once do not interleave. A home that already holds what it would write is used
without the lock, so a home one account prepared serves others read-only (the lock file is
not theirs to open: every tutorial's first cell failed on it). Nothing in it depends on the
time of day; the conversation record and every demo artifact are the same bytes on every
machine with the same packages.

Layout (``path`` defaults to ``$MURMUR_NB_DEMO_HOME`` or ``~/.murmur-nb-demo``)::

    <path>/
      facet-studio/modules/<id>/   module (executable launcher), main.py, _kit.py, overlays, skills
      artifacts/                   the host's content-addressed artifact store
      jobs/                        persistent ``jobs`` root for the long-running storyboard
      murmur/murmur.yaml           two hooks on one component: one granted read, one not
      murmur/hooks/                the built demo hook component (when the hook builder exists)
      murmur/conversations/demo-session.jsonl

Each ``module`` launcher's shebang is the absolute :data:`sys.executable` (``-IB``: isolated, no
bytecode written into the module folder), because modules run with an empty environment and
there is no ``PATH`` to find an interpreter on.
"""

from __future__ import annotations

import contextlib
import fcntl
import filecmp
import importlib
import os
import random
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from murmur_nb._conversations.store import ConversationStore
from murmur_nb._conversations.writer import RecordWriter
from murmur_nb._files.scratch import temp_folder
from murmur_nb._hooks.build import DEMO_HOOK_SOURCE, build_demo_hook, build_python_hook
from murmur_nb._hooks.host import HookHost
from murmur_nb._modules.host import ModuleHost
from murmur_nb._modules.policy import Policy

__all__ = [
    "DEMO_CONTEXT_ID",
    "DEMO_MODULE_IDS",
    "DemoHome",
    "demo_conversation",
    "prepare_demo_home",
]

#: The context id of the demo conversation record.
DEMO_CONTEXT_ID = "demo-session"
_SOURCES = Path(__file__).resolve().parent / "modules"
_SKIP_NAMES = frozenset({"__pycache__", "__init__.py"})
#: Ids of the shipped demo modules: every source folder with a ``main.py``. Read from disk,
#: not imported, so :mod:`murmur_nb._demo.modules` never becomes an attribute of the package.
DEMO_MODULE_IDS: tuple[str, ...] = tuple(
    sorted(p.name for p in _SOURCES.iterdir() if (p / "main.py").is_file())
)
#: Longest shebang line Linux reads in full; longer interpreters get a ``/bin/sh`` trampoline.
_SHEBANG_MAX = 127


@dataclass(frozen=True)
class DemoHome:
    """Where a prepared demo home lives; every path is absolute.

    Attributes
    ----------
    path
        The demo home folder.
    """

    path: Path

    @property
    def facet_home(self) -> Path:
        """``$FACET_STUDIO_HOME`` of the demo: holds ``modules/<id>/module``."""
        return self.path / "facet-studio"

    @property
    def murmur_home(self) -> Path:
        """``$MURMUR_HOME`` of the demo: holds ``conversations/`` and ``murmur.yaml``."""
        return self.path / "murmur"

    @property
    def artifact_store(self) -> Path:
        """The host's content-addressed artifact store for staging."""
        return self.path / "artifacts"

    @property
    def jobs(self) -> Path:
        """The persistent ``jobs`` root of the long-running ``studio.storyboard``."""
        return self.path / "jobs"

    @property
    def murmur_yaml(self) -> Path:
        """The capsule operator's ``murmur.yaml`` with the two demo hooks."""
        return self.murmur_home / "murmur.yaml"

    @property
    def context_id(self) -> str:
        """Context id of the demo conversation record."""
        return DEMO_CONTEXT_ID

    @property
    def record(self) -> Path:
        """The demo conversation record (JSON lines)."""
        return self.murmur_home / "conversations" / f"{DEMO_CONTEXT_ID}.jsonl"

    def module_dir(self, module_id: str) -> Path:
        """The installed folder of demo module ``module_id``."""
        return self.facet_home / "modules" / module_id

    def policy(self, **overrides: Any) -> Policy:
        """A :class:`murmur_nb.Policy` under which every demo capability can run.

        It maps the ``jobs`` root to :attr:`jobs` (the storyboard job survives between polls),
        grants the ``ffmpeg`` subprocess and resolves it to imageio-ffmpeg's bundled binary
        when that package is installed, and allows the ``demo-oracle`` paid provider, which
        still needs the operator's approval per call because its cost is unknown. Keyword
        arguments override any :class:`~murmur_nb.Policy` field.

        Its sandbox mode is ``"best-effort"``, not the default ``"required"``: the demo
        modules ship inside murmur-nb (they are as trusted as the library running them), and
        the demo must open on machines that lack a mechanism, such as Binder nodes that
        forbid user namespaces. There every call still runs under what the machine has and
        emits a visible :class:`~murmur_nb.SandboxWarning` naming what is missing; where
        every mechanism is present it is confined exactly as under ``"required"``. Modules
        you did not write belong under a policy of your own, which defaults to ``"required"``.
        """
        binaries: dict[str, str] = {}
        ffmpeg = _bundled_ffmpeg()
        if ffmpeg is not None:
            binaries["ffmpeg"] = ffmpeg
        fields: dict[str, Any] = {
            "roots": {"jobs": str(self.jobs)},
            "subprocess": ["ffmpeg"],
            "binaries": binaries,
            "paid_providers": ["demo-oracle"],
            "sandbox": "best-effort",
        }
        fields.update(overrides)
        return Policy(**fields)

    def host(self, policy: Policy | None = None, **kwargs: Any) -> ModuleHost:
        """A :class:`murmur_nb.ModuleHost` over the demo modules, store and :meth:`policy`.

        Keyword arguments go to :class:`~murmur_nb.ModuleHost` (for example ``runs_dir``).
        """
        return ModuleHost(
            home=self.facet_home,
            policy=policy if policy is not None else self.policy(),
            artifact_store=self.artifact_store,
            **kwargs,
        )

    def hooks(self) -> HookHost:
        """A :class:`murmur_nb.HookHost` of the demo's ``murmur.yaml`` over the demo's own
        conversation records (``HookHost.from_config`` alone reads ``$MURMUR_HOME``, by
        default ``~/.murmur``, where the demo record is not)."""
        return HookHost.from_config(self.murmur_yaml,
                                    conversations=ConversationStore(self.murmur_home))


def _bundled_ffmpeg() -> str | None:
    try:  # optional (murmur-nb[render]); imported by name so mypy needs no stubs for it
        imageio_ffmpeg: Any = importlib.import_module("imageio_ffmpeg")
    except ImportError:
        return None
    try:
        return str(imageio_ffmpeg.get_ffmpeg_exe())
    except RuntimeError:  # the package is there but its binary is not
        return None


def default_path() -> Path:
    """Where the demo home goes by default: ``$MURMUR_NB_DEMO_HOME``, else ``~/.murmur-nb-demo``."""
    env = os.environ.get("MURMUR_NB_DEMO_HOME")
    return Path(env) if env else Path.home() / ".murmur-nb-demo"


def _holds(target: Path, data: bytes, mode: int) -> bool:
    """Whether ``target`` holds exactly ``data``, with exactly ``mode``."""
    try:
        return target.read_bytes() == data and stat.S_IMODE(target.stat().st_mode) == mode
    except OSError:  # missing, or not ours to read: written (or refused) under the lock
        return False


def _write_if_changed(target: Path, data: bytes, *, mode: int = 0o644) -> bool:
    """Write ``data`` atomically unless ``target`` already holds exactly these bytes."""
    if _holds(target, data, mode):
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    tmp.write_bytes(data)
    tmp.chmod(mode)
    tmp.replace(target)
    return True


def launcher(module_id: str) -> bytes:
    """The executable ``module`` file of a demo module: runs ``main.py`` beside it."""
    interpreter = sys.executable
    body = (
        f'"""modproto v1 entry point of the murmur-nb demo module {module_id!r}.\n\n'
        "Written by murmur_nb.prepare_demo_home; it runs main.py beside it.\n"
        '"""\n'
        "import sys\n"
        "from pathlib import Path\n\n"
        "sys.path.insert(0, str(Path(__file__).resolve().parent))\n"
        "import main  # noqa: E402\n\n"
        "raise SystemExit(main.main(sys.argv[1:]))\n"
    )
    shebang = f"#!{interpreter} -IB\n"
    if len(shebang) <= _SHEBANG_MAX and " " not in interpreter:
        return (shebang + body).encode()
    # Too long (or spaced) for a kernel shebang: a POSIX-shell trampoline re-executes this file.
    quoted = interpreter.replace("'", "'\"'\"'")
    return (
        "#!/bin/sh\n"
        f"''''exec '{quoted}' -IB \"$0\" \"$@\" # '''\n" + body
    ).encode()


def _module_files(home: DemoHome) -> Iterator[tuple[Path, bytes, int]]:
    """Each file of the installed demo modules: where it goes, its bytes and its mode."""
    kit = (_SOURCES / "_kit.py").read_bytes()
    for module_id in DEMO_MODULE_IDS:
        source = _SOURCES / module_id
        dest = home.module_dir(module_id)
        for file in sorted(source.rglob("*")):
            rel = file.relative_to(source)
            if file.is_dir() or _SKIP_NAMES.intersection(rel.parts):
                continue
            yield dest / rel, file.read_bytes(), 0o644
        yield dest / "_kit.py", kit, 0o644
        yield dest / "module", launcher(module_id), 0o755


def _install_modules(home: DemoHome) -> None:
    for target, data, mode in _module_files(home):
        _write_if_changed(target, data, mode=mode)


_TOOLS = ("search_files", "read_file", "run_tests", "query_db", "render_chart", "fetch_url")
_PACKAGES = ("api", "core", "jobs", "ui")
_FILES = ("upload", "report", "query", "thumbs", "notes", "worker", "tz", "cache", "auth", "render")
_TOPICS = (
    "the flaky upload test",
    "the monthly sales report",
    "slow dashboard queries",
    "the image thumbnails",
    "the release notes",
    "a memory leak in the worker",
    "the onboarding tutorial",
    "timezone bugs in the scheduler",
)


def _tool_result(rng: random.Random, tool: str, topic: str) -> tuple[Any, bool]:
    """A tool result body (any JSON value) and whether the tool failed."""
    if rng.random() < 0.12:
        code = rng.choice(["timeout", "not_found", "permission_denied", "rate_limited"])
        return {"error": code, "message": f"{tool} failed: {code.replace('_', ' ')}"}, True
    body = _TOOL_BODIES.get(tool, _web_page)
    return body(rng, topic), False


def _search_files(rng: random.Random, topic: str) -> Any:
    hits = [
        {"path": f"src/{rng.choice(_PACKAGES)}/{w}.py", "line": rng.randint(1, 400)}
        for w in rng.sample(_FILES, rng.randint(1, 5))
    ]
    return {"query": topic, "matches": hits}


def _read_file(rng: random.Random, topic: str) -> Any:
    lines = [f"{n:4d}  # {topic}: step {n}" for n in range(1, rng.randint(6, 60))]
    return "\n".join(lines)


def _run_tests(rng: random.Random, topic: str) -> Any:
    passed = rng.randint(40, 220)
    failed = rng.choice([0, 0, 0, 1, 2])
    return {"passed": passed, "failed": failed, "seconds": round(rng.uniform(2, 90), 1)}


def _query_db(rng: random.Random, topic: str) -> Any:
    rows = [[f"2026-03-{d:02d}", rng.randint(100, 900)] for d in range(1, rng.randint(3, 12))]
    return {"columns": ["day", "orders"], "rows": rows}


def _render_chart(rng: random.Random, topic: str) -> Any:
    return [f"chart-{rng.randint(1000, 9999)}.png"]


def _web_page(rng: random.Random, topic: str) -> Any:
    return f"<html><title>{topic}</title>{'lorem ipsum ' * rng.randint(5, 120)}</html>"


_TOOL_BODIES: dict[str, Callable[[random.Random, str], Any]] = {
    "search_files": _search_files,
    "read_file": _read_file,
    "run_tests": _run_tests,
    "query_db": _query_db,
    "render_chart": _render_chart,
}


def demo_conversation(messages: int = 320, seed: int = 2026) -> list[dict[str, Any]]:
    """The demo conversation as record lines (SPEC §3): deterministic for one ``seed``.

    An agent session over several days: user requests, assistant replies, tool calls whose
    results are ``role: "tool"`` lines with ``tool_call_id``, ``name`` and ``is_error``
    (about one in eight fails), and a system prompt at the start of each day.
    """
    rng = random.Random(seed)
    clock = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)
    out: list[dict[str, Any]] = []
    call = 0
    day = -1

    def add(role: str, content: Any, **extra: Any) -> None:
        nonlocal clock
        clock += timedelta(seconds=rng.randint(3, 240))
        line: dict[str, Any] = {"id": f"m{len(out) + 1:05d}", "role": role, "content": content}
        line["created_at"] = clock.strftime("%Y-%m-%dT%H:%M:%SZ")
        line.update(extra)
        out.append(line)

    while len(out) < messages:
        if len(out) // 80 != day:
            day = len(out) // 80
            clock = datetime(2026, 3, 2 + day, 9, 0, 0, tzinfo=UTC) + timedelta(
                minutes=rng.randint(0, 50)
            )
            add("system", "You are the capsule's assistant. Use tools; cite what they return.")
        topic = rng.choice(_TOPICS)
        add("user", f"Can you look into {topic}?")
        for _ in range(rng.randint(1, 4)):
            tool = rng.choice(_TOOLS)
            call += 1
            call_id = f"call_{call:04d}"
            add("assistant", f"Calling {tool} ({call_id}) for {topic}.", name="assistant")
            body, failed = _tool_result(rng, tool, topic)
            add("tool", body, name=tool, tool_call_id=call_id, is_error=failed)
        add("assistant", f"Summary for {topic}: done, see the tool results above.")
    return out[:messages]


def _render_record(scratch: Path) -> Path:
    """Write the demo conversation through :class:`murmur_nb.RecordWriter` under ``scratch``."""
    with RecordWriter(scratch, DEMO_CONTEXT_ID, buffered=True, stamp=False) as writer:
        for m in demo_conversation():
            writer.append(
                m["role"],
                m["content"],
                id=m["id"],
                name=m.get("name"),
                created_at=m["created_at"],
                tool_call_id=m.get("tool_call_id"),
                is_error=m.get("is_error"),
            )
        return writer.path


def _write_record(home: DemoHome) -> None:
    """Put the demo conversation record in place unless it already holds exactly these lines.

    The record is written whole in a scratch murmur home and renamed over the old one, so a
    reader sees either the previous record or the complete new one, never a half-written one.
    """
    scratch = home.path / f".record-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        fresh = _render_record(scratch)
        if _same_file(fresh, home.record):
            return
        home.record.parent.mkdir(parents=True, exist_ok=True)
        fresh.replace(home.record)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _record_current(home: DemoHome) -> bool:
    """Whether the record holds exactly the demo conversation (rendered aside, not in the
    home, which may not be ours to write)."""
    with tempfile.TemporaryDirectory(prefix="murmur-nb-demo-record-", dir=temp_folder()) as scratch:
        return _same_file(_render_record(Path(scratch)), home.record)


def _same_file(one: Path, other: Path) -> bool:
    try:
        return filecmp.cmp(one, other, shallow=False)
    except OSError:
        return False


def _murmur_yaml(component: str) -> bytes:
    text = (
        "# The demo capsule's murmur.yaml, written by murmur_nb.prepare_demo_home.\n"
        "# Two hooks share one component: only `summarize` may read the conversation.\n"
        "inference:\n"
        "  transport: api\n"
        "hooks:\n"
        "  summarize:\n"
        f"    component: {component}   # relative to this file\n"
        "    events: [task-start, compact]\n"
        "    capabilities:\n"
        "      conversation:\n"
        "        read: true\n"
        "  peek:\n"
        f"    component: {component}\n"
        "    events: [task-start, compact]\n"
        "    # no `conversation.read: true` here: the hook links and runs, and every\n"
        "    # read-messages call returns not-granted (default deny)\n"
    )
    return text.encode()


def _component(home: DemoHome) -> Path:
    """Where the demo hook component goes; ``murmur.yaml`` names it, built or not."""
    return home.murmur_home / "hooks" / "summarize.wasm"


def _murmur_yaml_of(home: DemoHome) -> bytes:
    return _murmur_yaml(Path(os.path.relpath(_component(home), home.murmur_home)).as_posix())


def _install_hooks(home: DemoHome, *, build: bool) -> None:
    if build:  # cached by source digest; rewrites the file only when the build differs
        build_demo_hook(home.murmur_home)  # <murmur_home>/hooks/summarize.wasm
    _write_if_changed(home.murmur_yaml, _murmur_yaml_of(home))


def _hook_current(home: DemoHome) -> bool:
    """Whether the component is this murmur-nb's build of the demo hook. The build is this
    account's own (in its cache, by source digest: free once built), so nothing in the home
    is written to find out."""
    if not _component(home).is_file():
        return False
    return _same_file(build_python_hook(DEMO_HOOK_SOURCE), _component(home))


def _current(home: DemoHome, *, hooks: bool) -> bool:
    """Whether the home holds everything :func:`prepare_demo_home` would write, as it would
    write it: then it is used as it is, read-only, without the lock."""
    return (
        all(_holds(target, data, mode) for target, data, mode in _module_files(home))
        and all(sub.is_dir() for sub in (home.artifact_store, home.jobs))
        and _holds(home.murmur_yaml, _murmur_yaml_of(home), 0o644)
        and _record_current(home)
        and (not hooks or _hook_current(home))
    )


def _install(home: DemoHome, *, hooks: bool) -> None:
    _install_modules(home)
    for sub in (home.artifact_store, home.jobs, home.record.parent):
        sub.mkdir(parents=True, exist_ok=True)
    _write_record(home)
    _install_hooks(home, build=hooks)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """Hold the home's lock while it is written. The lock is the preparer's alone (``0600``,
    made so if an older version left it readable): any account that can open a file can
    ``flock`` it, and one holding the lock of a shared home root prepares stalled every
    update of it."""
    folder.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(folder / ".prepare.lock", flags, 0o600)
    try:
        os.fchmod(fd, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _not_writable(folder: Path, exc: PermissionError) -> PermissionError:
    """What to do when a home that needs writing is not this account's to write."""
    own = "~/.murmur-nb-demo"
    if folder == Path(own).expanduser():
        own = "~/murmur-nb-demo"
    return PermissionError(
        exc.errno,
        f"the demo home {folder} is not up to date (missing files, or files of another "
        f"murmur-nb version) and this account cannot write it ({exc.strerror}: "
        f"{exc.filename}); use a folder of your own, prepare_demo_home({own!r}) (or set "
        "$MURMUR_NB_DEMO_HOME to it), or ask the account that owns it to call "
        "prepare_demo_home() on it again",
    )


def prepare_demo_home(
    path: str | os.PathLike[str] | None = None, *, hooks: bool = True
) -> DemoHome:
    """Lay out a complete demo home at ``path`` and return where everything is.

    Parameters
    ----------
    path
        The folder to fill; created if missing. Defaults to ``$MURMUR_NB_DEMO_HOME``, else
        ``~/.murmur-nb-demo``.
    hooks
        Build the demo hook component when it is not built yet (takes a while the first
        time). ``murmur.yaml`` is written either way.

    Returns
    -------
    DemoHome
        Paths of the module home, artifact store, murmur home and ``murmur.yaml``, plus
        :meth:`DemoHome.policy` for a :class:`murmur_nb.ModuleHost` over the demo modules.

    Raises
    ------
    PermissionError
        The home needs writing (missing files, or those of another murmur-nb version) and
        this account cannot write it; the message names a folder of its own to pass.

    Notes
    -----
    Idempotent and safe to call from several processes at once: files are rewritten only
    when their bytes differ, and a lock (``.prepare.lock`` in the home) serialises callers
    that write. A home that already holds everything, as this version writes it, is used as
    it is, without the lock: one account (root, an image's build) may prepare a shared
    ``$MURMUR_NB_DEMO_HOME`` that others then use read-only. Files a user added (for
    example the model ``transcribe`` asks for) are left alone.
    """
    folder = Path(path) if path is not None else default_path()
    folder = folder.expanduser().absolute()
    home = DemoHome(folder)
    if _current(home, hooks=hooks):
        return home
    try:
        with _locked(folder):
            _install(home, hooks=hooks)
    except PermissionError as exc:
        if exc.filename is None or not Path(exc.filename).is_relative_to(folder):
            raise
        raise _not_writable(folder, exc) from exc
    return home
