"""Sandbox plans made once per launch and carried out per call (:class:`Plans`).

The bwrap plan of one capability's calls (:func:`.sandbox.launch`) differs from call to call
only in the working folder's name and the descriptor of the seccomp program's pipe: the
paths it binds (resolved to real ones), the sandbox id's passage to the module folder on a
root host, the argv laid out, and the zygote's message (each bind sent with what its source
is, :func:`.zygote.translate`) are the same. :class:`Plans` keeps, per host, the plan of each
launch that ran, and a later call of the same launch only

- checks that every path the plan names still names the file it was planned with: each bind
  source, and each root, binary and module folder as the caller gave it (links followed).
  A root renamed away, removed and made again, or a link pointed elsewhere is another file:
  the call is planned afresh, as the first was, and that plan is kept. When the zygote runs
  the call and every such path is a bind source it is sent with its identity (``--same``),
  the zygote's own look is that check (one ``stat`` a path less in the kernel, and no gap
  between two looks): a call it refuses as stale is planned afresh then, and runs on
  that plan;
- on a root host, gives the sandbox id its roots again (:func:`.access.grant_root`: what was
  made in a root since the last call gets its entry, as with every call before);
- opens the seccomp program's pipe, and puts the folder's name and the pipe into the argv
  and the message.

Only bwrap plans of a private working folder without a network grant are kept (the ones the
zygote forks, or sandboxes are made ahead for); any other launch is planned per call.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from murmur_nb._sandbox import seccomp
from murmur_nb._sandbox import zygote as zygote_
from murmur_nb._sandbox.sandbox import (
    Launch,
    Pair,
    SandboxReport,
    launch,
    launch_resolved,
    reachable_for_the_sandbox_id,
    resolved,
    same_files,
)
from murmur_nb.protocol import Root

__all__ = ["KEEP", "Plans"]

#: how many launches' plans one host keeps (most recently used)
KEEP = 32

#: what identifies a launch: its argv, module folder, runs folder, binaries and roots, and
#: the seccomp program it loads
_Key = tuple[object, ...]


@dataclass(frozen=True)
class _Plan:
    """One launch's plan, as its first call made it."""

    #: that call's argv, and its working folder's name, at the indexes ``named``
    argv: tuple[str, ...]
    name: str
    named: tuple[int, ...]
    #: the index of the ``--seccomp`` descriptor in ``argv``, if any
    program_at: int | None
    #: the descriptors every call passes (the user namespace's as root)
    fixed_fds: tuple[int, ...]
    #: each path the plan names and the file it named then
    files: tuple[tuple[str, zygote_.Identity], ...]
    #: the roots given again to the sandbox id at each call (root hosts)
    ro: tuple[Pair, ...]
    rw: tuple[Pair, ...]
    confinement: str
    #: the zygote's message (:func:`.zygote.translate`); the descriptor it sends is the
    #: program's pipe, when there is one
    message: bytes | None
    #: every path of ``files`` is a bind source the message sends with its identity: the
    #: zygote's look at the sources checks all of them
    zygote_checks: bool = False

    def carry_out(self, report: SandboxReport, runs: Path, name: str,
                  forker: zygote_.Zygote | None) -> Launch:  # fmt: skip
        """This plan for a call whose working folder is ``runs / name``, forked by
        ``forker`` (``None``: bwrap makes the sandbox)."""
        bpf, at = report._seccomp, self.program_at  # a program exactly when the plan had one
        argv = list(self.argv)
        for i in self.named:
            argv[i] = argv[i].replace(self.name, name)
        data = None
        if self.message is not None and forker is not None:
            data = self.message.replace(self.name.encode(), name.encode())
        fds: tuple[int, ...] = ()
        program = None
        if at is not None and bpf is not None:
            # one descriptor kept for every call, which the zygote reads from its start;
            # bwrap reads its descriptor to its end: it gets a pipe (Launch.for_bwrap)
            kept = seccomp.kept_program_fd(bpf)
            argv[at] = str(kept)
            fds, program = (kept,), (at, kept, bpf)
        launch = Launch(argv, None, self.confinement, _nothing,
                        pass_fds=(*self.fixed_fds, *fds), owns_pid_namespace=True,
                        start_in=runs, program=bpf if forker is None else None, zygote=forker,
                        message=None if data is None else (data, fds),
                        bwrap_program=program)  # fmt: skip
        return launch if data is not None else launch.for_bwrap()


def _nothing() -> None:
    """A launch's ``close`` with nothing of its own to close."""


class Plans:
    """The sandbox plans of one host's launches (:mod:`.plans`)."""

    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._lock = threading.Lock()
        self._plans: OrderedDict[_Key, _Plan] = OrderedDict()

    def launch(
        self,
        report: SandboxReport,
        argv: Sequence[str],
        *,
        cwd: Path,
        module_dir: Path,
        roots: Mapping[str, Root],
        binaries: Iterable[str] = (),
        network: Sequence[str] = (),
        private_cwd: bool = False,
    ) -> Launch:
        """:func:`.sandbox.launch`, from this launch's plan when one was made and every path
        it names still names the same file."""
        binaries = tuple(binaries)
        if network or not private_cwd or report._bwrap is None or report.mode == "off":
            return launch(report, argv, cwd=cwd, module_dir=module_dir, roots=roots,
                          binaries=binaries, network=network, private_cwd=private_cwd)  # fmt: skip
        given = tuple((name, str(root.path), root.mode) for name, root in roots.items())
        runs = cwd.parent
        key: _Key = (tuple(argv), str(module_dir), str(runs), binaries, given, report._seccomp)
        with self._lock:
            plan = self._plans.get(key)
            if plan is not None:
                self._plans.move_to_end(key)
        if plan is not None:
            forker, identity = zygote_.zygote(), report.guarantees.get("identity")
            # the zygote looks at every path the plan names itself when it forks the call
            # (not where roots are handed to the sandbox id first: that asks the kernel's look)
            by_zygote = (forker is not None and plan.message is not None and plan.zygote_checks
                         and not (identity and (plan.ro or plan.rw)))  # fmt: skip
            if by_zygote or same_files(plan.files):
                if identity:
                    reachable_for_the_sandbox_id(None, list(plan.ro), list(plan.rw))
                how = plan.carry_out(report, runs, cwd.name, forker)
                if by_zygote:
                    how.on_stale = functools.partial(
                        self._afresh, key, plan, report, argv, cwd=cwd, module_dir=module_dir,
                        roots=roots, binaries=binaries,
                    )  # fmt: skip
                return how
        return self._afresh(key, plan, report, argv, cwd=cwd, module_dir=module_dir, roots=roots,
                            binaries=binaries)  # fmt: skip

    def _afresh(
        self,
        key: _Key,
        stale: _Plan | None,
        report: SandboxReport,
        argv: Sequence[str],
        *,
        cwd: Path,
        module_dir: Path,
        roots: Mapping[str, Root],
        binaries: tuple[str, ...],
    ) -> Launch:
        """The launch planned in full, its plan kept in place of ``stale`` (a plan a path of
        which names another file now)."""
        with self._lock:
            if stale is not None and self._plans.get(key) is stale:
                del self._plans[key]
        how, plan = _planned(report, argv, cwd=cwd, module_dir=module_dir, roots=roots,
                             binaries=binaries)  # fmt: skip
        if plan is not None:
            try:
                with self._lock:
                    self._plans[key] = plan
                    while len(self._plans) > self._keep:
                        self._plans.popitem(last=False)
            except BaseException:  # the caller never gets the launch: close the pipe it holds
                how.close()
                raise
        return how


def _planned(
    report: SandboxReport,
    argv: Sequence[str],
    *,
    cwd: Path,
    module_dir: Path,
    roots: Mapping[str, Root],
    binaries: Iterable[str],
) -> tuple[Launch, _Plan | None]:
    """The call's launch, planned in full, and its plan to keep (``None`` when a path changed
    while it was planned, or the zygote's message cannot be made: the next call plans
    afresh)."""
    module, reads, ro, rw = resolved(module_dir, roots, binaries)
    given = _named([shown for _, shown in [*reads, *ro, *rw]])  # before the plan reads one
    how = launch_resolved(report, argv, cwd=cwd, module=module, reads=reads, ro=ro, rw=rw,
                          network=(), private_cwd=True)  # fmt: skip
    try:
        return how, _plan_of(how, cwd=cwd, reads=reads, ro=ro, rw=rw, given=given)
    except BaseException:  # the caller never gets the launch: close the pipe it holds
        how.close()
        raise


def _plan_of(
    how: Launch,
    *,
    cwd: Path,
    reads: list[Pair],
    ro: list[Pair],
    rw: list[Pair],
    given: dict[str, zygote_.Identity] | None,
) -> _Plan | None:
    """The plan to keep of ``how``, the call's launch as :func:`_planned` planned it."""
    seen: dict[str, zygote_.Identity] = {}
    try:
        data, fds = zygote_.translate(how.argv, how.pass_fds, seen)
    except zygote_.ZygoteRefused:
        return None
    program_at = _program_at(how.argv)
    program = int(how.argv[program_at]) if program_at is not None else None
    if given is None or fds != ([program] if program is not None else []):
        return None  # a path it cannot look at, a descriptor it cannot make again
    files = dict(given)
    for path, ident in seen.items():
        if files.setdefault(path, ident) != ident:
            return None  # moved while it was planned: this call's plan only
    for real, shown in [*reads, *ro, *rw]:
        if real in seen and seen[real] != given[shown]:
            return None
    if how.zygote is not None:
        how.message = (data, tuple(fds))  # this call's too: made once
    return _Plan(
        argv=tuple(how.argv),
        name=cwd.name,
        named=tuple(at for at, arg in enumerate(how.argv) if cwd.name in arg),
        program_at=program_at,
        fixed_fds=tuple(fd for fd in how.pass_fds if fd != program),
        files=tuple(files.items()),
        ro=tuple(ro),
        rw=tuple(rw),
        confinement=how.confinement,
        message=data,
        zygote_checks=files.keys() <= seen.keys(),
    )


def _named(paths: Iterable[str]) -> dict[str, zygote_.Identity] | None:
    """What each path names now (links followed; ``None``: nothing), or ``None`` when one
    cannot be looked at."""
    try:
        return {path: zygote_.identity_of(path) for path in paths}
    except OSError:
        return None


def _program_at(argv: Sequence[str]) -> int | None:
    """The index of bwrap's ``--seccomp`` descriptor (options come before ``--``)."""
    for at, arg in enumerate(argv):
        if arg == "--":
            return None
        if arg == "--seccomp":
            return at + 1
    return None
