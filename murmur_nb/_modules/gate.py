"""The host's side of the module sandbox: one report per host, refusal or one warning, launch.

What holds is probed once, from the policy the host has then
(:func:`murmur_nb._sandbox.sandbox_report`). ``sandbox="required"`` refuses a gap
(:class:`~murmur_nb.SandboxUnavailable`), ``"best-effort"`` warns once per host
(:class:`~murmur_nb.SandboxWarning`) and notes it on every invocation, ``"off"`` says nothing.
"""

from __future__ import annotations

import functools
import os
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from murmur_nb._exceptions import ModuleHostError, SandboxUnavailable, SandboxWarning
from murmur_nb._files import own_state
from murmur_nb._modules.policy import Policy
from murmur_nb._modules.staging import StagedArtifact, staged_view
from murmur_nb._sandbox import (
    Launch,
    RunResult,
    SandboxReport,
    hidden_interpreter,
    run_launched,
    sandbox_report,
)
from murmur_nb._sandbox.plans import Plans
from murmur_nb._sandbox.warm import WarmSandboxes, make_warm, plan_key
from murmur_nb.protocol import Root

__all__ = ["SandboxGate", "own_folder_problem", "runs_folder_problem"]


def runs_folder_problem(report: SandboxReport, runs: Path, roots: Mapping[str, Root]) -> str:
    """Why a root cannot be supplied beside the runs folder it holds (``""`` when it can).

    Each call's working folder and fresh write roots are made in the runs folder. A root at
    or above it (the CLI's ``--home F --root data=<above F>``, or ``/tmp`` with the default
    runs folder) is fine in a mount namespace: the sandbox lays a tmpfs of its own over the
    runs folder, after the root, so the working folder is made there and no other call's
    folders show (:func:`murmur_nb._sandbox.sandbox.launch`). Not so where there is none
    (Landlock: the module sees the host's own tree, and its root would show every other
    call's folders, and for a write root let it change them), nor for a root that *is* the
    runs folder (the tmpfs would hide it).
    """
    if report.mechanism not in ("bwrap", "landlock"):
        return ""  # no file rule: a module reads what its uid reads anyway
    real = os.path.realpath(runs)
    inside = real.rstrip("/") + "/"
    for name, root in roots.items():
        path = str(root.path)
        if not inside.startswith(path.rstrip("/") + "/"):
            continue
        if report.mechanism == "landlock":
            what = "holds" if real != path else "is"
            danger = (
                "without a mount namespace (the sandbox here is Landlock) a module given "
                f"{name!r} would reach every other call's folders through it"
            )
        elif real == path:
            what, danger = "is", ("the sandbox keeps the runs folder out of a module's sight, "
                                  "so the root would show empty")  # fmt: skip
        else:
            continue
        kind = "write" if root.mode == "rw" else "read"
        return (
            f"no module was run: policy maps {kind} root {name!r} to {path}, which {what} "
            f"this host's runs folder {real} (each call's working folder and fresh write "
            f"roots are made there); {danger}. Map {name!r} to a folder that does not hold "
            "the runs folder, or give ModuleHost(runs_dir=...) (murmur-nb --runs-dir) a "
            f"folder outside {path}"
        )
    return ""


def own_folder_problem(report: SandboxReport, runs: Path, roots: Mapping[str, Root]) -> str:
    """Why a root cannot be supplied where it is or holds one of murmur-nb's own folders
    (:mod:`murmur_nb._files.own_state`: the sealing key's, the snapshot store, the cache, a
    store; ``""`` when it can).

    A root that is one of them, or lies inside one (but this host's runs folder, where the
    fresh write roots and the ``staged`` view are), is refused wherever there is a file
    rule. A root that holds one is fine in a mount namespace (bubblewrap lays an empty tmpfs
    over the folder: :func:`murmur_nb._sandbox.sandbox.launch`) and on a root host, whose
    sandbox uid is never given the folder (:func:`murmur_nb._sandbox.access.grant_root`);
    not with Landlock alone as the user: Landlock allows a tree, and cannot take a folder
    out of it, and the module runs as the user who owns the folder.
    """
    if report.mechanism not in ("bwrap", "landlock"):
        return ""  # no file rule: a module reads what its uid reads anyway
    runs_real = os.path.realpath(runs)
    carved = report.mechanism == "bwrap" or (report.guarantees.get("identity") is not None
                                              and os.geteuid() == 0)  # fmt: skip
    for own in own_state.folders():
        for name, root in roots.items():
            path = os.path.realpath(root.path)
            if path == runs_real or path.startswith(runs_real.rstrip("/") + "/"):
                continue
            if path == own or path.startswith(own.rstrip("/") + "/"):
                what = "is" if path == own else "lies inside"
            elif not carved and own.startswith(path.rstrip("/") + "/"):
                what = "holds"
            else:
                continue
            kind = "write" if root.mode == "rw" else "read"
            where = "" if what == "is" else f" {own}"
            return (
                f"no module was run: policy maps {kind} root {name!r} to {path}, which {what} "
                f"murmur-nb's own folder{where} (the sealing key that vouches for the compiled "
                "hook components the kernel runs, every module's snapshot with its private "
                "config.env, the caches): it is never given to a module"
                + ("" if what != "holds" else
                   "; without a mount namespace (the sandbox here is Landlock, as this user) it "
                   "cannot be taken out of the root")
                + f". Map {name!r} to a narrower folder that does not hold {own}, or move "
                "that folder out of the root ($MURMUR_NB_KEYS, $MURMUR_NB_SNAPSHOTS, "
                "$MURMUR_NB_CACHE)"
            )
    return ""


class SandboxGate:
    """The sandbox report of one host and what it allows."""

    def __init__(self, policy: Callable[[], Policy]) -> None:
        self._policy = policy
        self._report: SandboxReport | None = None
        self._warned: set[str] = set()  # each problem is warned about once per host
        #: launches whose ``#!`` interpreter the sandbox shows: checked once, not per run (the
        #: module file is its snapshot's, which does not change); a refusal is checked again
        self._interpreter_seen: set[tuple[object, ...]] = set()
        #: sandboxes made ahead for the next call of a plan that ran before
        #: (:mod:`murmur_nb._sandbox.warm`)
        self.warm = WarmSandboxes()
        #: each launch's sandbox plan, made by its first call (:mod:`murmur_nb._sandbox.plans`)
        self.plans = Plans()

    @property
    def report(self) -> SandboxReport:
        if self._report is None:
            policy = self._policy()
            self._report = sandbox_report(policy.sandbox, policy.sandbox_mechanisms,
                                          network_isolation=policy.network_isolation,
                                          tmpfs=policy.sandbox_tmpfs_bytes)
        return self._report

    def check(self, *, network: bool = False) -> None:
        """Refuse (``sandbox="required"``) or warn once (``"best-effort"``) when incomplete;
        with ``network`` (a call with a network grant), also when the grant cannot be kept
        to outside hosts."""
        report = self.report
        if report.mode == "off" or (report.complete and not network):
            return
        problem = report.problem()
        missing = report.missing
        if network and report.granted_network is None:
            problem = "; ".join(p for p in (problem, report.granted_network_problem()) if p)
            missing = [*missing, "granted_network"]
        if not problem:
            return
        if report.mode == "required":
            raise SandboxUnavailable(f"no module was run: {problem}", missing=missing)
        if problem not in self._warned:
            self._warned.add(problem)
            # "partly" only when a guarantee holds (the confinement line says "none" else)
            held = any(how is not None for how in report.guarantees.values())
            warnings.warn(
                f"modules run {'only partly confined' if held else 'unconfined'}: {problem}",
                SandboxWarning,
                stacklevel=5,
            )

    def launch(
        self,
        argv: list[str],
        cwd: Path,
        module_dir: Path,
        roots: dict[str, Root],
        binaries: Sequence[str] = (),
        *,
        network: Sequence[str] = (),
    ) -> Launch:
        """How to start ``argv`` confined (checked first, see :meth:`check`); ``network`` is
        the call's ``grants.network``.

        Raises
        ------
        SandboxUnavailable
            Nothing ran: a guarantee is missing (``sandbox="required"``), or the interpreter
            on the module's ``#!`` line is not in the sandbox (the message names it).
        ModuleHostError
            ``root_unavailable``: a root holds the runs folder where the sandbox cannot keep
            it out of sight (:func:`runs_folder_problem`), or is, or holds where the sandbox
            cannot take it out, one of murmur-nb's own folders (:func:`own_folder_problem`).
        """
        self.check(network=bool(network))
        report = self.report
        seen = (argv[0], str(module_dir), tuple(binaries),
                tuple(sorted((name, repr(root)) for name, root in roots.items())))  # fmt: skip
        if seen not in self._interpreter_seen:
            hidden = hidden_interpreter(report, argv[0], module_dir=module_dir, roots=roots,
                                        binaries=binaries)  # fmt: skip
            if hidden:
                raise SandboxUnavailable(f"no module was run: {hidden}")
            self._interpreter_seen.add(seen)
        if roots and report.mode != "off":
            problem = runs_folder_problem(report, cwd.parent, roots) or own_folder_problem(
                report, cwd.parent, roots)
            if problem:
                raise ModuleHostError(problem, code="root_unavailable")
        return self.plans.launch(
            report,
            argv,
            cwd=cwd,
            module_dir=module_dir,
            roots=roots,
            binaries=binaries,
            network=network,
            private_cwd=self.makes_cwd,
        )

    def run(
        self,
        how: Launch,
        stdin: bytes,
        *,
        cwd: Path,
        deadline_s: float,
        max_output_bytes: int,
        cancel: threading.Event | None,
        ahead: bool = True,
    ) -> RunResult:
        """Run ``how`` (this call's plan, checked and granted), in the sandbox made ahead for
        the same plan when one waits; when the plan ran before, one is made for its next run
        meanwhile, from ``how`` (:mod:`murmur_nb._sandbox.warm`), unless not ``ahead``."""
        # the key (the plan's whole argv, rewritten) only when a sandbox may be waiting or
        # be made: a batch's rows make none, and find none waiting
        key = plan_key(how, cwd) if ahead or self.warm.waiting() else None
        warm = self.warm.take(key)
        try:
            if key is not None and ahead:  # make_warm reads how's argv, none of its descriptors
                self.warm.ran(key, functools.partial(make_warm, how, cwd))
            if warm is None:
                return run_launched(how, stdin, cwd=cwd, deadline_s=deadline_s,
                                    max_output_bytes=max_output_bytes, cancel=cancel)  # fmt: skip
            how.close()  # planned to be checked and compared: the waiting one is the same plan
            return run_launched(warm.how, stdin, cwd=warm.cwd, deadline_s=deadline_s,
                                max_output_bytes=max_output_bytes, cancel=cancel,
                                started=warm.proc)  # fmt: skip
        except BaseException:  # interrupted before the run took the one made ahead: kill it
            if warm is not None:
                warm.discard()
            raise

    def close(self) -> None:
        """Kill the sandboxes made ahead for this host."""
        self.warm.close()

    @property
    def makes_cwd(self) -> bool:
        """bwrap makes each run's working folder on the sandbox's own tmpfs: the host only
        names it (:meth:`.workspace.Workspace.cwd`)."""
        return self.report.makes_cwd

    def warning(self) -> list[str]:
        """The invocation warning of a best-effort sandbox with a guarantee missing."""
        report = self.report
        if report.complete or report.mode != "best-effort":
            return []
        return [f"sandbox (best-effort): {report.confinement}"]

    def staged_view(self, run_dir: Path, staged: Sequence[StagedArtifact]) -> Path:
        """The consumer's ``staged`` root: exactly the staged files, never the whole store."""
        # hard links only when the sandbox keeps ro roots read-only (no write reaches the store)
        link = self.report.guarantees.get("read_only_roots") is not None
        return staged_view(run_dir / "staged-view", staged, link=link)
