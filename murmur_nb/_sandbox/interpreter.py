"""A module's ``#!`` interpreter, looked at before it runs: is it where the sandbox shows it?

A module is an executable started with an empty environment in a sandbox that shows only
some trees (``docs/sandbox.md``). When its ``#!`` line names an interpreter outside them (a
shell copied to ``/tmp``, a conda environment under ``/opt``, another user's venv), ``exec``
fails inside the sandbox with ``ENOENT`` for the *module's* path, which exists: the drop
helper says ``cannot execute …/module (errno 2)``, the host that describe printed nothing,
and the module's author looks for a bug in their describe output. The kernel reads the line
instead (on the host: the interpreter is not the module's to hide) and refuses the run with
a message that names the interpreter, what the sandbox shows and how to fix it.

The line is read once per executable (a module runs from its content-addressed, read-only
snapshot, so the bytes at a path never change); an interpreter found where the sandbox shows
it is remembered for that executable and those trees, so a call costs a dictionary look-up.
A refusal is looked at afresh every time: an interpreter installed since runs.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Sequence

__all__ = ["interpreter_of", "interpreter_problem"]

#: what the kernel reads of an executable for its ``#!`` line (Linux's BINPRM_BUF_SIZE)
_LINE_BYTES = 256


@functools.lru_cache(maxsize=1024)
def interpreter_of(exe: str) -> str | None:
    """The interpreter ``exe``'s ``#!`` line names (its first word, as the kernel reads it),
    or ``None``: no such line (a compiled program), or the file cannot be read."""
    try:
        with open(exe, "rb") as fh:  # noqa: PTH123 - a str path, read once
            head = fh.read(_LINE_BYTES)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].replace(b"\t", b" ").strip().split(b" ", 1)
    return os.fsdecode(words[0]) if words[0] else None


def interpreter_problem(
    exe: str, shown: Sequence[str], *, by_real_path: bool, described: str
) -> str:
    """Why the interpreter on ``exe``'s ``#!`` line cannot start in a sandbox that shows the
    trees ``shown`` (``""`` when it can, or ``exe`` has no such line).

    ``by_real_path``: the sandbox checks only where the interpreter really is (Landlock, on
    the host's own tree); otherwise (a mount namespace) both the path as named and the file
    it leads to must be in a shown tree. ``described`` says what the sandbox shows, for the
    message.
    """
    named = interpreter_of(exe)
    if named is None:
        return ""
    try:
        return _shown(named, tuple(shown), by_real_path)
    except _Hidden as hidden:
        return _problem(named, str(hidden), described)


class _Hidden(Exception):
    """What keeps the interpreter from the sandbox (not cached: it may be installed later)."""


@functools.lru_cache(maxsize=1024)
def _shown(named: str, shown: tuple[str, ...], by_real_path: bool) -> str:
    """``""`` when ``named`` is in a shown tree (remembered), else raises :class:`_Hidden`."""
    if not named.startswith("/"):
        raise _Hidden("relative")
    try:
        os.stat(named)  # noqa: PTH116 - a str path
    except FileNotFoundError:
        raise _Hidden("missing") from None
    except OSError as exc:
        raise _Hidden(f"unreachable: {exc.strerror or exc}") from None
    real = os.path.realpath(named)
    if not _beneath(real, shown) or not (by_real_path or _beneath(named, shown)):
        raise _Hidden(real)
    return ""


def _beneath(path: str, trees: Sequence[str]) -> bool:
    return any(path == tree or path.startswith(tree.rstrip("/") + "/") for tree in trees)


def _problem(named: str, why: str, described: str) -> str:
    own = f"#!{sys.executable}"
    if why == "relative":
        return (
            f"the module's #! line names the interpreter {named!r} by a relative path, which "
            "the sandbox looks up from the call's working folder (and there is no PATH): name "
            f"it by its absolute path, one the sandbox shows ({described}); for Python, this "
            f"kernel's own: {own}"
        )
    if why == "missing":
        return (
            f"the module's interpreter {named} (on the #! line of its executable) does not "
            "exist on this machine, so the module cannot start. Install it there, or start "
            f"the module with an interpreter that exists; for Python, this kernel's own: {own}"
        )
    if why.startswith("unreachable: "):
        return (
            f"the module's interpreter {named} (on the #! line of its executable) cannot be "
            f"reached by this account ({why.removeprefix('unreachable: ')}), nor by the "
            "module. Let this account read it, or start the module with an interpreter it "
            f"can; for Python, this kernel's own: {own}"
        )
    real = f" (which is {why})" if why != named else ""
    return (
        f"the module's interpreter {named}{real}, on the #! line of its executable, is not "
        f"in the module sandbox, so the module cannot start there, though its file exists. "
        f"The sandbox shows only {described}. Install the interpreter under one of those "
        "(/usr/local/bin, say), or start the module with one that is there: for Python, this "
        f"kernel's own ({own}), or run the kernel from the module's environment (the running "
        "Python's installation is shown)"
    )
