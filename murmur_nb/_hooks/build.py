"""Building hook components from Python sources with componentize-py, and from JavaScript
with componentize-js.

A source is parsed first, so a syntax error or a missing ``Handlers`` class costs
milliseconds, not a failed build's tens of seconds. componentize-py runs in a subprocess of
``sys.executable`` (its output goes into the error). :func:`componentize_js_toolchain`
installs the pinned componentize-js and preview2-shim with the machine's ``npm`` into
``<cache>/npm/`` once per version pair (nothing in ``~/.npm``); hooks get no network, so the
``http`` and ``fetch-event`` features are left out. Builds are cached by the digest of the
sources, the WIT folder and the tool versions, written under a temporary name first.

A root kernel loads what is in ``builds/`` and runs what is in ``npm/`` as root, and a build's
key is public (the same source gives the same name for every account). So, the rule of every
cache (:func:`murmur_nb._files.trust.nobody_else_can_write`), it uses a cached build only when
nobody else can write it, its folder or any folder above, and a toolchain only when nobody
else can write any file or folder in it nor any folder above it. Otherwise (``sudo -E`` keeps a
user's ``HOME``; a root container may be given a user's) it builds, and installs the
toolchain, into a fresh private folder of this process (removed at exit) and leaves the other
folder alone; npm then reads no ``~/.npmrc`` that anyone else could write (it names the
registry the toolchain comes from).

Both tools (and npm) run with their temporary folder (``TMPDIR``) a ``0700`` folder of this
process's own (:func:`_tool_env`): componentize-js writes the hook's source and its build into a
folder it makes there with the umask's mode, which in ``/tmp`` every account could read
while the build ran.

A kernel may be killed while it builds (``SIGKILL``: a culled or restarted kernel, the OOM
killer), and builds take tens of seconds. Each tool is asked to die with it
(:func:`_dies_with_kernel`), and each build, or install, is made in a folder beside its
destination that the kernel holds locked (:func:`~murmur_nb._files.scratch.owned_folder`),
so the next build there removes a killed kernel's. Before, componentize-py ran on for its
20 s and left its component (18 MiB for the demo hook) under a temporary name for good.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import os
import secrets
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from murmur_nb._exceptions import HookError, MissingDependency
from murmur_nb._files.scratch import owned_folder, process_folder, release
from murmur_nb._files.trust import (
    nobody_else_can_write,
    tool_environment,
    trusted_folder,
    trusted_which,
)
from murmur_nb._rules import NotReadable, cache_dir, file_kind, sha256_file

__all__ = [
    "COMPONENTIZE_JS",
    "DEMO_HOOK_SOURCE",
    "HOOK_WORLD",
    "PREVIEW2_SHIM",
    "build_demo_hook",
    "build_js_hook",
    "build_python_hook",
    "componentize_js_toolchain",
    "wit_dir",
]

HOOK_WORLD = "hook"
COMPONENTIZE_JS = "0.23.0"
PREVIEW2_SHIM = "0.25.0"
_CJS_PACKAGE = "@bytecodealliance/componentize-js"
_SHIM_PACKAGE = "@bytecodealliance/preview2-shim"


def wit_dir() -> Path:
    """The WIT folder shipped in the package (``world.wit`` plus ``deps/``)."""
    return Path(__file__).with_name("wit")


def _as_root() -> bool:
    return os.geteuid() == 0


@functools.cache
def _private_folder() -> Path:
    """A folder of this process's alone (``0700``), removed when the process exits."""
    return process_folder("murmur-nb-builds-")


def _private(name: str) -> Path:
    folder = _private_folder() / name
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def _tool_env() -> dict[str, str]:
    """The environment of a build tool (:func:`~murmur_nb._files.trust.tool_environment`:
    for a root kernel, only what nobody else can have planted), with the temporary folder
    this process's private ``tmp``, so what a tool writes there is for no other account
    (componentize-js's work folder is ``0755``, the hook's source in it ``0644``;
    componentize-py unpacks its standard library there), and, for a root kernel whose
    ``HOME`` another account could write, a private ``home`` (node looks for modules in
    ``~/.node_modules``)."""
    return tool_environment(_private("tmp"), lambda: _private("home"))


def _cache_folder(name: str) -> Path:
    """``<cache>/<name>``; for a root kernel, unless nobody else can write it or a folder
    above it, this process's private ``<name>`` (nothing is made in the other folder)."""
    shared = cache_dir() / name
    if not _as_root():
        return shared
    return trusted_folder(shared, lambda: _private(name))


def _usable(path: Path) -> bool:
    """Whether this kernel may use a file of a cache folder: always, but a root kernel only
    one nobody else can write (the folder may be trusted, the file still another's)."""
    return not _as_root() or nobody_else_can_write(path)


#: the folders a build, or a toolchain install, is made in (beside where it goes), each held
#: by its kernel for as long as it builds (:func:`~murmur_nb._files.scratch.owned_folder`)
_BUILDING = ".tmp-building-"

#: what :func:`_dies_with_kernel` runs first in the child: the death signal is asked for,
#: then the tool is executed in its place (``PR_SET_PDEATHSIG`` survives ``execve``)
_DIE_WITH = (
    "import ctypes, os, sys\n"
    "ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(137)  # the kernel ended before the tool asked\n"
    "try:\n"
    "    os.execvp(sys.argv[2], sys.argv[2:])\n"
    "except OSError as exc:\n"
    "    print(f'could not run {sys.argv[2]}: {exc}', file=sys.stderr, flush=True)\n"
    "    os._exit(127)\n"
)


def _dies_with_kernel(command: list[str]) -> list[str]:
    """``command``, run so that the tool is killed (``SIGKILL``) when this process ends,
    however it ends: a small interpreter of ours asks for it (``prctl``), then becomes the
    tool. Not a ``preexec_fn``, which runs Python between ``fork`` and ``exec`` in a kernel
    with threads (a lock one of them held at the fork is never let go in the child). Where
    there is no ``prctl`` (not Linux), ``command`` itself."""
    if sys.platform != "linux":
        return command
    return [sys.executable, "-I", "-S", "-c", _DIE_WITH, str(os.getpid()), *command]


def _componentize_available() -> bool:
    # Found, not imported: its extension embeds a wasmtime of its own, which has no business
    # in this process (componentize-py runs in a subprocess).
    from importlib.util import find_spec  # noqa: PLC0415

    return find_spec("componentize_py") is not None


def _tool_version() -> str:
    from importlib.metadata import version  # noqa: PLC0415

    return version("componentize-py")


def _wit_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted(wit_dir().rglob("*.wit")):
        digest.update(path.relative_to(wit_dir()).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _precheck(source: Path) -> None:
    """Catch the common mistakes in milliseconds instead of a failed build's tens of seconds."""
    import ast  # noqa: PLC0415 - only when building

    text = source.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text, filename=str(source))
    except SyntaxError as exc:
        raise HookError(
            f"{source} has a syntax error at line {exc.lineno}: {exc.msg}; fix it and build again",
            code="hook_build_failed",
        ) from exc
    if not any(isinstance(node, ast.ClassDef) and node.name == "Handlers" for node in tree.body):
        raise HookError(
            f"{source} defines no top-level `class Handlers(exports.Handlers)`; a hook module "
            "implements on_task_start and on_compact on that class "
            "(`from wit_world import exports`)",
            code="hook_build_failed",
        )


def build_python_hook(
    path: str | os.PathLike[str], *, output: str | os.PathLike[str] | None = None
) -> Path:
    """Build a hook written in Python into a WebAssembly component with componentize-py.

    The module must define ``class Handlers(exports.Handlers)`` implementing
    ``on_task_start`` and ``on_compact`` (bindings: ``from wit_world import exports``; the
    conversation import is ``from wit_world.imports import read``). Builds are cached by the
    digest of the source, the WIT folder and the componentize-py version, so rebuilding an
    unchanged hook returns at once.

    Parameters
    ----------
    path : path-like
        The hook's ``.py`` file. Other modules in the same folder are importable from it.
    output : path-like, optional
        Where to copy the built ``.wasm``; by default the cached build is returned.

    Returns
    -------
    Path
        The built component.

    Raises
    ------
    MissingDependency
        componentize-py is not installed.
    HookError
        The source is missing or componentize-py failed (its output is in the message).
    """
    source = _hook_source(
        path,
        (".py",),
        "is not a Python source file; pass the .py file that defines the hook's Handlers class",
    )
    _precheck(source)
    if not _componentize_available():
        raise MissingDependency("componentize-py", "hooks", "Building a Python hook")
    files = _key_sources(source, source.parent.rglob("*.py"))
    key = _build_key(f"componentize-py={_tool_version()};wit={_wit_digest()};", source, files)
    built = _cache_folder("builds") / f"{source.stem}-{key}.wasm"
    _build_once(built, lambda tmp: _componentize_py(source, tmp))
    return _place(built, output)


def _componentize_py(source: Path, tmp: Path) -> None:
    """Run componentize-py on ``source``, writing the component to ``tmp``."""
    command = [
        sys.executable,
        "-c",
        "import sys; from componentize_py import script; "
        "sys.argv[0] = 'componentize-py'; sys.exit(script())",
        "-d",
        str(wit_dir()),
        "-w",
        HOOK_WORLD,
        "componentize",
        source.stem,
        "-p",
        str(source.parent),
        "-o",
        str(tmp),
    ]
    done = subprocess.run(_dies_with_kernel(command), capture_output=True, text=True,
                          check=False, env=_tool_env())  # fmt: skip
    if done.returncode != 0 or not tmp.is_file():
        output = (done.stderr or done.stdout).split("Stack backtrace:")[0].strip()
        raise HookError(
            f"componentize-py could not build {source} (exit {done.returncode}):\n"
            f"{output[-3000:]}",
            code="hook_build_failed",
        )


def _hook_source(path: str | os.PathLike[str], suffixes: tuple[str, ...], refusal: str) -> Path:
    """The resolved hook source file, refused (``hook_build_failed``) unless it has a suffix."""
    source = Path(path).expanduser().resolve()
    if not source.is_file() or source.suffix not in suffixes:
        raise HookError(f"{source} {refusal}", code="hook_build_failed")
    return source


#: What a build's key reads of the hook's folder: at most so many source files and so many
#: bytes in all (a module's snapshot has the same defaults, ``Policy.max_module_entries`` and
#: ``max_module_bytes``). A hook is a few files; a folder past these is not a hook's own.
_KEY_FILES = 20_000
_KEY_BYTES = 512 << 20
_KEY_OPEN = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY


def _key_sources(source: Path, found: Iterable[Path]) -> list[Path]:
    """The source files ``found`` beside ``source`` (no ``__pycache__``), sorted; at most
    :data:`_KEY_FILES`, else ``hook_build_failed`` (the walk stops there)."""
    files: list[Path] = []
    for file in found:
        if "__pycache__" in file.parts:
            continue
        if len(files) == _KEY_FILES:
            raise HookError(
                f"the folder of {source} holds more than {_KEY_FILES:,} source files (a build "
                "is keyed by every one of them); put the hook and its modules in a folder of "
                "their own",
                code="hook_build_failed",
            )
        files.append(file)
    return sorted(files)


def _build_key(tools: str, source: Path, files: list[Path]) -> str:
    """The cache key of a build: the tool versions, every source file in the folder, the entry.

    Each file is read streamed from one descriptor, :data:`_KEY_BYTES` in all at most."""
    key = hashlib.sha256()
    key.update(tools.encode())
    room = _KEY_BYTES
    for file in files:
        fd = _key_source_fd(file, source)
        if fd is None:
            continue
        try:
            key.update(file.relative_to(source.parent).as_posix().encode() + b"\0")
            while chunk := os.read(fd, min(1 << 20, room + 1)):
                room -= len(chunk)
                if room < 0:
                    raise HookError(
                        f"the source files in the folder of {source} hold more than "
                        f"{_KEY_BYTES >> 20} MiB (a build is keyed by every byte of them; "
                        f"the last one read was {file}); put the hook and its modules in a "
                        "folder of their own",
                        code="hook_build_failed",
                    )
                key.update(chunk)
            key.update(b"\0")
        finally:
            os.close(fd)
    key.update(source.name.encode())
    return key.hexdigest()[:24]


def _key_source_fd(file: Path, source: Path) -> int | None:
    """A descriptor of the regular file ``file`` names (links followed), or ``None`` when it
    names nothing a build could import: a folder, a dangling link (an editor's lock file
    ``.#hook.py``) or a link loop. Anything else is refused (``hook_build_failed``) before it
    is opened: the open of a FIFO waited for a writer forever, ``/dev/zero`` never ends, and
    opening some devices does something (a watchdog's arms it)."""
    try:
        st = file.stat()
        if stat.S_ISREG(st.st_mode):
            fd = os.open(file, _KEY_OPEN)
            st = os.fstat(fd)  # the same file still, or not opened for long
            if stat.S_ISREG(st.st_mode):
                return fd
            os.close(fd)
    except OSError as exc:
        if exc.errno in {errno.ENOENT, errno.ELOOP}:
            return None
        raise HookError(
            f"{file}, a source file in the folder of the hook {source.name}, cannot be read "
            f"({exc.strerror or exc}); a build is keyed by every source file there: make it "
            "readable, or remove it",
            code="hook_build_failed",
        ) from exc
    if stat.S_ISDIR(st.st_mode):
        return None
    raise HookError(
        f"{file}, in the folder of the hook {source.name}, is {file_kind(st)}, not a regular "
        "file; a build is keyed by every source file there and reads none but regular files. "
        "Remove it (or rename it), or put the hook in a folder of its own",
        code="hook_build_failed",
    )


def _build_once(built: Path, produce: Callable[[Path], None]) -> None:
    """Unless ``built`` exists (and is :func:`_usable`), ``produce`` it in a folder of this
    process's beside it (a killed kernel's are removed first) and rename it into place."""
    if built.is_file() and _usable(built):
        return
    built.parent.mkdir(parents=True, exist_ok=True)
    folder = owned_folder(_BUILDING, built.parent)
    try:
        tmp = folder / built.name
        produce(tmp)
        tmp.replace(built)
    finally:
        release(folder)


#: the demo ``summarize`` hook's guest source (componentize-py)
DEMO_HOOK_SOURCE = (
    Path(__file__).resolve().parents[1] / "_demo" / "hooks_src" / "summarize" / "app.py"
)


def build_demo_hook(dest_dir: str | os.PathLike[str]) -> Path:
    """Build the demo ``summarize`` hook into ``dest_dir/hooks/summarize.wasm``.

    ``dest_dir`` is a capsule folder (where ``murmur.yaml`` lives); the returned path is the
    one the demo ``murmur.yaml`` names as ``component: hooks/summarize.wasm``.
    """
    return build_python_hook(DEMO_HOOK_SOURCE, output=Path(dest_dir) / "hooks" / "summarize.wasm")


def _run_tool(
    command: list[str], what: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> None:
    """Run a build tool; a failure is a ``hook_build_failed`` with the tool's output."""
    try:
        done = subprocess.run(_dies_with_kernel(command), capture_output=True, text=True,
                              check=False, cwd=cwd, stdin=subprocess.DEVNULL,
                              env=env)  # fmt: skip
    except OSError as exc:
        raise HookError(
            f"{what}: could not run {command[0]}: {exc}", code="hook_build_failed"
        ) from exc
    if done.returncode != 0:
        output = (done.stderr.strip() + "\n" + done.stdout.strip()).strip()
        raise HookError(
            f"{what} failed (exit {done.returncode}):\n{output[-3000:]}", code="hook_build_failed"
        )


def _node_tool(name: str) -> str:
    found = trusted_which(name)  # for a root kernel, one nobody else can replace
    if found is None:
        raise HookError(
            f"building a JavaScript hook needs Node.js and npm, and `{name}` is not on PATH; "
            "install Node.js 18 or newer (with npm) and build again",
            code="hook_build_failed",
        )
    return found


def componentize_js_toolchain() -> Path:
    """Install componentize-js and preview2-shim under the cache (once), return the folder.

    The folder holds ``node_modules/``; it is filled under a temporary name and renamed into
    place, so a half-finished install is never taken for a complete one. A root kernel uses
    one only when nobody else can write anything in it nor any folder above it, and
    otherwise installs one into a private folder of this process (the module docstring).
    """
    name = f"componentize-js-{COMPONENTIZE_JS}-preview2-shim-{PREVIEW2_SHIM}"
    root = _cache_folder("npm")
    home = root / name
    if _installed(home) and (not _as_root() or _nobody_else_can_write_tree(home)):
        return home
    if _as_root() and os.path.lexists(home):  # there, but another account's to change
        root = _private("npm")
        home = root / name
        if _installed(home):
            return home
    _npm_install(root, home)
    return home


def _installed(home: Path) -> bool:
    return (home / "node_modules" / _CJS_PACKAGE / "package.json").is_file()


def _nobody_else_can_write_tree(top: Path) -> bool:
    """``top``, every folder above it and everything in it: nobody else can write them; a
    link in it is this user's or root's and points inside it."""
    if not nobody_else_can_write(top):
        return False
    me, inside = os.geteuid(), os.path.realpath(top)
    for folder, dirs, files in os.walk(top):
        for entry in (Path(folder) / name for name in [*dirs, *files]):
            try:
                is_link, owner = entry.is_symlink(), entry.lstat().st_uid
            except OSError:
                return False
            if is_link:
                target = os.path.realpath(entry)
                if owner not in (me, 0) or os.path.commonpath([inside, target]) != inside:
                    return False
            elif not nobody_else_can_write(entry):
                return False
    return True


def _npm_user_config(root: Path) -> list[str]:
    """``--userconfig`` naming an empty file in ``root`` when a root kernel's npm would
    otherwise read a user config (``~/.npmrc``: the registry, the proxy) that anyone else
    could write or put in place; no arguments otherwise."""
    named = [v for k, v in os.environ.items() if k.lower() == "npm_config_userconfig" and v]
    config = Path(named[0] if named else "~/.npmrc").expanduser()
    if not _as_root() or (
        nobody_else_can_write(config)
        if os.path.lexists(config)
        else nobody_else_can_write(config.parent)
    ):
        return []
    empty = root / "empty.npmrc"
    empty.write_text("", encoding="utf-8")
    return ["--userconfig", str(empty)]


def _npm_install(root: Path, home: Path) -> None:
    """Install the pinned packages with the machine's npm into ``home`` (in ``root``)."""
    npm = _node_tool("npm")
    root.mkdir(parents=True, exist_ok=True)
    manifest = {
        "private": True,
        "dependencies": {_CJS_PACKAGE: COMPONENTIZE_JS, _SHIM_PACKAGE: PREVIEW2_SHIM},
    }
    folder = owned_folder(_BUILDING, root)  # a killed kernel's half-finished install removed
    tmp = folder / home.name
    try:
        tmp.mkdir()
        (tmp / "package.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        _run_tool(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--ignore-scripts",
                "--no-package-lock",
                "--no-update-notifier",
                "--cache",
                str(root / "_npm-cache"),
                *_npm_user_config(root),
            ],
            f"npm install {_CJS_PACKAGE}@{COMPONENTIZE_JS} {_SHIM_PACKAGE}@{PREVIEW2_SHIM}",
            cwd=tmp,
            env=_tool_env(),
        )
        try:
            tmp.rename(home)
        except OSError:  # another process finished first: keep its copy
            if not _installed(home):
                raise
    finally:
        release(folder)


def build_js_hook(
    path: str | os.PathLike[str], *, output: str | os.PathLike[str] | None = None
) -> Path:
    """Build a hook written in JavaScript (an ES module) with componentize-js.

    The module exports ``handlers`` with ``onTaskStart(event)`` and ``onCompact(messages)``
    and may import ``readMessages`` from ``murmur:conversation/read@0.1.0``. The toolchain is
    installed on first use (:func:`componentize_js_toolchain`); builds are cached by the
    sources in the module's folder, the WIT folder and the toolchain versions.

    Raises
    ------
    HookError
        The source is missing, Node.js/npm are missing, or the install or build failed (the
        tool's output is in the message).
    """
    source = _hook_source(
        path,
        (".js", ".mjs"),
        "is not a JavaScript source file; pass the .js module that exports the hook's handlers",
    )
    node = _node_tool("node")
    node_version = subprocess.run(
        [node, "--version"], capture_output=True, text=True, check=False, env=_tool_env()
    ).stdout.strip()
    tools = (
        f"componentize-js={COMPONENTIZE_JS};preview2-shim={PREVIEW2_SHIM};node={node_version};"
        f"wit={_wit_digest()};"
    )
    key = _build_key(tools, source, _key_sources(source, source.parent.glob("*.*js")))
    built = _cache_folder("builds") / f"{source.stem}-js-{key}.wasm"
    _build_once(built, lambda tmp: _componentize_js(node, source, tmp))
    return _place(built, output)


def _componentize_js(node: str, source: Path, tmp: Path) -> None:
    """Run componentize-js (installed on first use) on ``source``, writing to ``tmp``."""
    cli = componentize_js_toolchain() / "node_modules" / _CJS_PACKAGE / "src" / "cli.js"
    _run_tool(
        [
            node,
            str(cli),
            str(source),
            "-w",
            str(wit_dir()),
            "-n",
            HOOK_WORLD,
            "-d",
            "http",
            "fetch-event",
            "-o",
            str(tmp),
        ],
        f"componentize-js could not build {source}",
        env=_tool_env(),
    )
    if not tmp.is_file():
        raise HookError(
            f"componentize-js could not build {source}: it wrote no component",
            code="hook_build_failed",
        )


def _place(built: Path, output: str | os.PathLike[str] | None) -> Path:
    """The cached build, or a copy of it at ``output``, put there whole (written under a
    temporary name and renamed: another kernel may be loading the hook from ``output``, and
    a copy written in place was read half-written, "not a valid component")."""
    if output is None:
        return built
    target = Path(output).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        same = target.exists() and sha256_file(target) == sha256_file(built)
    except NotReadable as exc:  # a FIFO there: its open would wait; a device: never end
        raise HookError(
            f"output={str(target)!r} cannot take the built hook: {exc}, and it was left as "
            "it is; name the path of a regular file, or a new one",
            code="hook_build_failed",
        ) from None
    if not same:
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)  # umask's
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(built.read_bytes())
            tmp.replace(target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    return target

