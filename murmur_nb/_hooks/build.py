"""Building hook components from Python sources with componentize-py.

Design notes
------------
* **Fail fast, then build once.** A source is parsed before componentize-py runs, so the common
  mistakes (a syntax error, no ``Handlers`` class) cost milliseconds rather than a failed
  build's tens of seconds. Builds are cached by the digest of the sources, the WIT folder and
  the componentize-py version, and written to a temporary name first, so a cached build is
  always complete.
* componentize-py runs in a subprocess of ``sys.executable``, so its output and any crash stay
  out of the kernel; its output is returned in the error message.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from murmur_nb._exceptions import HookError, MissingDependency
from murmur_nb._hooks.cache import cache_dir, sha256_file

__all__ = ["HOOK_WORLD", "build_demo_hook", "build_python_hook", "wit_dir"]

HOOK_WORLD = "hook"


def wit_dir() -> Path:
    """The WIT folder shipped in the package (``world.wit`` plus ``deps/``)."""
    return Path(__file__).with_name("wit")


def _componentize_available() -> bool:
    try:
        import componentize_py  # noqa: F401, PLC0415 - only probing that it is installed
    except ImportError:
        return False
    return True


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
    source = Path(path).expanduser().resolve()
    if not source.is_file() or source.suffix != ".py":
        raise HookError(
            f"{source} is not a Python source file; pass the .py file that defines the "
            "hook's Handlers class",
            code="hook_build_failed",
        )
    _precheck(source)
    if not _componentize_available():
        raise MissingDependency("componentize-py", "hooks", "Building a Python hook")
    key = hashlib.sha256()
    key.update(f"componentize-py={_tool_version()};wit={_wit_digest()};".encode())
    for file in sorted(source.parent.rglob("*.py")):
        if "__pycache__" in file.parts:
            continue
        key.update(file.relative_to(source.parent).as_posix().encode() + b"\0")
        key.update(file.read_bytes() + b"\0")
    key.update(source.name.encode())
    built = cache_dir() / "builds" / f"{source.stem}-{key.hexdigest()[:24]}.wasm"
    if not built.is_file():
        built.parent.mkdir(parents=True, exist_ok=True)
        tmp = built.with_name(f".tmp-{os.getpid()}-{built.name}")
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
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not tmp.is_file():
            tmp.unlink(missing_ok=True)
            output = (done.stderr or done.stdout).split("Stack backtrace:")[0].strip()
            raise HookError(
                f"componentize-py could not build {source} (exit {done.returncode}):\n"
                f"{output[-3000:]}",
                code="hook_build_failed",
            )
        tmp.replace(built)
    if output is None:
        return built
    target = Path(output).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists() or sha256_file(target) != sha256_file(built):
        target.write_bytes(built.read_bytes())
    return target


def build_demo_hook(dest_dir: str | os.PathLike[str]) -> Path:
    """Build the demo ``summarize`` hook into ``dest_dir/hooks/summarize.wasm``.

    ``dest_dir`` is a capsule folder (where ``murmur.yaml`` lives); the returned path is the
    one the demo ``murmur.yaml`` names as ``component: hooks/summarize.wasm``.
    """
    source = Path(__file__).resolve().parents[1] / "_demo" / "hooks_src" / "summarize" / "app.py"
    return build_python_hook(source, output=Path(dest_dir) / "hooks" / "summarize.wasm")
