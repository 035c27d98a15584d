"""The module checker: every host rule applied to one module up front, as a report.

A check runs the module through a :class:`ModuleHost` with the caller's policy (sandbox
included) in a temporary home linking to the checked folder, so what passes here passes in a
notebook; the host's own read-only snapshot means the folder is never written. Rules are not
re-implemented: describe problems, envelope breaches (``ProtocolViolation.rule``) and artifact
checks are the host's; the checker adds describe-twice stability, skill and overlay hashes,
generated and broken inputs, and polls. Boundary inputs (:mod:`.check_boundaries`) go before
seeded random ones; a module printing no envelope fails on an allowed input and warns on a
refused one. Write roots share one folder per check so a poll finds its job. Inputs of a
capability run in one pool within its time budget (:class:`Budget`, started once its inputs
are generated): each call's deadline fits what is left, and the inputs it leaves out are
counted in the report (``budget=0``: no limit); refused inputs it left out are a skipped row.

A schema the generator cannot follow, or that no input satisfies, is a row, never an
exception (:class:`Planned`). A refused descriptor that was read had every describe rule
applied, so the rules the host did not name pass; keys no field names are warned about
(:mod:`.check_keys`), and so is a check that invoked no capability (``invoke.coverage``). A
reproduction works after the check: ``--home`` of the home the module is installed in, else
``--module-dir`` of its folder.
"""

from __future__ import annotations

import json
import math
import shlex
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypedDict

from murmur_nb._checker.check_boundaries import (
    BOUNDARY_BUDGET_S,
    KINDS,
    MAX_BOUNDARIES,
    boundary_examples,
)
from murmur_nb._checker.check_inputs import invalid_examples, valid_examples
from murmur_nb._checker.check_keys import (
    UnknownKey,
    descriptor_read,
    raw_describe,
    unknown_keys,
)
from murmur_nb._checker.check_report import CheckReport, CheckResult, Status
from murmur_nb._checker.check_rules import RULES, describe_rule_for_path, envelope_rule
from murmur_nb._exceptions import (
    ApprovalRequired,
    DeadlineExceeded,
    InvalidDescriptor,
    InvalidInput,
    MissingRequirement,
    ModuleHostError,
    ModuleNotFound,
    ProtocolViolation,
)
from murmur_nb._files.scratch import remove_tree, temp_folder
from murmur_nb._modules.host import ModuleHost
from murmur_nb._modules.invocation import Invocation
from murmur_nb._modules.policy import Policy
from murmur_nb._modules.request import poll_request
from murmur_nb._render.presentation import resolve
from murmur_nb._rules import clipped, facet_studio_home, printable, printable_json, usable_cores
from murmur_nb._schemas.descriptor import descriptor_digest
from murmur_nb.protocol import Capability, Descriptor

__all__ = ["Budget", "check_module", "module_folder"]

_DESCRIBE_RULES = (
    "describe.runs",
    "describe.envelope",
    "describe.shape",
    "descriptor.protocol_versions",
    "descriptor.capability_ids",
    "descriptor.schema_ids",
    "descriptor.schemas_valid",
    "descriptor.artifact_schemas",
    "descriptor.poll_capability",
    "descriptor.documents_confined",
    "descriptor.requirements",
)
_INVOKE_RULES = (
    "invoke.generated_inputs",
    "invoke.no_envelope",
    "invoke.envelope",
    "invoke.request_id",
    "invoke.execution",
    "invoke.bounds",
    "invoke.result_schema",
    "invoke.artifacts_verify",
    "invoke.artifact_kinds",
    "invoke.presentation",
)

#: Gives the one-line reproduction of sending a value (``True``: through the host's check).
Reproduce = Callable[[Any, bool], str]

#: Generated inputs of one capability run this many at a time (each is its own process tree).
#: Twice the usable cores (a call spends part of its time setting up its sandbox; a
#: container's CPU quota counts, :func:`~murmur_nb._rules.usable_cores`), two to four.
_WORKERS = max(2, min(4, 2 * usable_cores()))
#: Envelope rules a module breaks by not answering at all (a crash, a traceback on stdout):
#: on an input its schema refuses that is a warning, since the host validates first anyway.
_CRASH_RULES = frozenset({"json", "trailing_data"})
#: The envelope rule broken when standard output holds no envelope at all.
_NO_ENVELOPE = "json"
#: How much of a module's stderr a report row shows.
_TAIL_LINES, _TAIL_CHARS = 20, 2048
#: Unmet requirements a skipped row names (the others are counted), and how much of each
#: reason to ask approval it shows (a reason quotes what the descriptor declares).
_LISTED, _REASON_CHARS = 10, 500
#: The least time worth starting a module for (a call sets up its sandbox first).
MIN_CALL_S = 0.25
#: Why an input has no outcome: never started, or stopped when the budget ran out.
LeftOut = Literal["unsent", "stopped"]


def result(
    check: str, status: Status, *, capability: str = "", path: str = "", detail: str = "",
    reproduce: str = "", stderr: str = "", sent: Any = None, returncode: int | None = None,
) -> CheckResult:
    """A report row for ``check``, with the rule's text and fix filled in (``sent``: the
    input a reproduction sends).

    ``path`` and ``detail`` quote the module (a key it wrote, a requirement's words, its
    error), and every view prints them (the text report to a terminal): their control
    characters and bidirectional overrides are escaped here, once, after each quote was cut.
    """
    rule = RULES[check]
    return CheckResult(
        check, status, rule.text, capability, printable(path), printable(detail), rule.fix,
        reproduce, stderr, sent, returncode,
    )


class Evidence(TypedDict):
    stderr: str
    returncode: int | None


def evidence(outcome: Invocation | ModuleHostError) -> Evidence:
    """What a row shows of the module's run: its stderr tail and exit status."""
    inv = outcome if isinstance(outcome, Invocation) else outcome.invocation
    code = getattr(inv, "returncode", None)
    return Evidence(stderr=stderr_tail(outcome), returncode=code)


def stderr_tail(outcome: Invocation | ModuleHostError) -> str:
    """The last lines of the module's stderr (at most 20 lines, 2 KiB), control characters
    and bidirectional overrides escaped (:func:`~murmur_nb._rules.printable`), so a report
    shows what the module said without letting it style the report or the terminal."""
    inv = outcome if isinstance(outcome, Invocation) else outcome.invocation
    text = inv.stderr if inv is not None else ""
    tail = "\n".join(text.rstrip().splitlines()[-_TAIL_LINES:])[-_TAIL_CHARS:]
    return printable(tail)


def check_module(
    module: str | Path,
    *,
    home: str | Path | None = None,
    policy: Policy | None = None,
    examples: int = 5,
    seed: int = 0,
    approve: Iterable[str] = (),
    boundaries: int = MAX_BOUNDARIES,
    budget: float = BOUNDARY_BUDGET_S,
) -> CheckReport:
    """Check a modproto v1 module against every rule the host enforces; return the report.

    Parameters
    ----------
    module
        A module folder (holding the executable ``module``), or the id of a module installed
        under ``home``.
    home
        The facet-studio home to look ``module`` up in when it is an id; default
        ``$FACET_STUDIO_HOME`` or ``~/.facet-studio``. The check never runs there: it links
        the module into a temporary home, and the host runs its snapshot.
    policy
        The host policy to check under (roots, grants, bounds, sandbox); default
        :class:`~murmur_nb.Policy` with every declared write root mapped to one scratch
        folder for the whole check.
    examples
        Random inputs generated per capability from its ``request_schema``, after its
        boundary inputs.
    seed
        The generator's seed; the same seed gives the same inputs.
    approve
        Capability ids to invoke although they need operator approval (they may spend money
        or publish). Others that need approval are reported as skipped.
    boundaries
        At most this many boundary inputs per capability (edge cases derived from its
        ``request_schema``, sent before the random ones); 0 sends none.
    budget
        Seconds each capability's calls may take (boundary, random and refused inputs, and
        its poll): every call's deadline is cut to what is left, an input not started or
        stopped by then is left out, and the report says how many (0: no time limit). The
        budget makes a slow module's check end in bounded time; under it the report depends
        on the machine's speed, so pass 0 where a check must be reproducible to the input.

    Returns
    -------
    CheckReport
        One row per check; ``report.ok`` is false when any check failed.

    Raises
    ------
    ModuleNotFound
        ``module`` is neither a module folder nor an installed module id.

    Examples
    --------
    >>> import murmur_nb as mnb
    >>> report = mnb.check_module("path/to/my-module")  # doctest: +SKIP
    >>> report.ok, len(report.failures)  # doctest: +SKIP
    (True, 0)
    """
    source = module_folder(module, home)
    started = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix="murmur-nb-check-", dir=temp_folder()))
    report = CheckReport(module=source.name, path=source, examples=examples, seed=seed)
    try:
        facet_home = scratch / "home"
        (facet_home / "modules").mkdir(parents=True)
        (facet_home / "modules" / source.name).symlink_to(source, target_is_directory=True)
        checker = _Checker(facet_home, source, policy, scratch / "roots")
        with checker.host, checker.job_host:
            report.results = checker.run(
                examples=examples, seed=seed, approve=set(approve),
                boundaries=boundaries, budget=budget,
            )  # fmt: skip
        report.inputs = checker.inputs
        report.left_out = checker.left_out
        report.budget = budget
    finally:
        remove_tree(scratch)  # what the module wrote in its roots, however deep
        report.duration_s = time.perf_counter() - started
    return report


def module_folder(module: str | Path, home: str | Path | None = None) -> Path:
    """The folder ``module`` names, resolved: a module folder, or the id of a module installed
    under ``home`` (default ``$FACET_STUDIO_HOME`` or ``~/.facet-studio``).

    Raises
    ------
    ModuleNotFound
        It is neither; the message says what is there and which home was searched.
    """
    as_path = Path(module).expanduser()
    if (as_path / "module").exists():
        return as_path.resolve()
    text = str(module)
    installed = Path(home).expanduser().absolute() if home else facet_studio_home()
    if "/" not in text and text not in {".", ".."}:
        folder = installed / "modules" / text
        if (folder / "module").exists():
            return folder.resolve()
        searched = f" (no {folder})"
    else:
        searched = ""
    raise ModuleNotFound(
        f"{str(module)!r} is neither a module folder (a folder holding the executable "
        f"'module'{_what_is_there(as_path)}) nor the id of a module installed in the "
        f"facet-studio home {installed}{searched}; pass the folder's path"
    )


def _what_is_there(path: Path) -> str:
    """What ``path`` is instead of a module folder, for the refusal."""
    if path.is_dir():
        return "; this folder has none"
    if path.exists():
        return "; this is a file: pass the folder holding it"
    return "; nothing is there"


class Budget:
    """The time one capability's calls may take (``seconds`` <= 0: no limit), under a
    policy whose deadline is ``policy_ms``.

    ``--budget 5`` promises a check that ends. Not starting inputs once the time is spent is
    not enough: an input started just before the end runs as long as the module takes, up to
    the policy's deadline, and a schema that allows a 30 s wait gets one at its ``maximum``.
    So every call of a capability (boundary, random and refused inputs, the poll) runs with
    the policy's deadline or what is left, whichever is shorter, and none starts with less
    than :data:`MIN_CALL_S` left. A call the budget stops is left out, like one never
    started: the module's own deadline was never reached, so it is no ``invoke.bounds``
    failure.
    """

    def __init__(self, seconds: float, policy_ms: int) -> None:
        self.seconds = seconds
        self.policy_ms = policy_ms
        self.ends = time.monotonic() + seconds if seconds > 0 else math.inf

    def call_deadline_ms(self) -> int | None:
        """The deadline for a call starting now, or ``None`` when too little time is left."""
        left = self.ends - time.monotonic()
        if left < MIN_CALL_S:
            return None
        return self.policy_ms if left == math.inf else min(self.policy_ms, int(left * 1000))

    def stopped(self, deadline_ms: int, outcome: object) -> bool:
        """Whether a call run with ``deadline_ms`` was stopped by the budget (not by the
        policy's own deadline)."""
        return isinstance(outcome, DeadlineExceeded) and deadline_ms < self.policy_ms

    def words(self) -> str:
        """``the 5 s budget``, as a report names it."""
        return f"the {self.seconds:g} s budget"


class _Checker:
    """The checks of one module, run in order against one host."""

    def __init__(self, facet_home: Path, source: Path, policy: Policy | None, roots: Path):
        module_id = source.name
        self.module_id = module_id
        self.source = source
        # where a reproduction finds the module: its own home when it is installed in one
        self.source_home = source.parent.parent if source.parent.name == "modules" else None
        self.inputs: dict[str, dict[str, int]] = {}
        self.left_out: dict[str, dict[str, int]] = {}
        self.folder = facet_home / "modules" / module_id
        self.roots = roots
        self.policy = policy or Policy()
        # Generated inputs run side by side, each with fresh write roots (those of a
        # long-running capability too); the one start a poll follows, and the poll, run one
        # after the other on write roots that persist.
        self.host = ModuleHost(facet_home, policy=self.policy)
        self.job_host = ModuleHost(facet_home, policy=self.policy)
        self.rows: list[CheckResult] = []

    def run(
        self, *, examples: int, seed: int, approve: set[str], boundaries: int, budget: float
    ) -> list[CheckResult]:
        descriptor = self.check_describe()
        if descriptor is None:
            return self.rows
        self.check_documents(descriptor)
        self.host.policy = self.scratch_policy(descriptor, persistent_writes=False)
        self.job_host.policy = self.scratch_policy(descriptor, persistent_writes=True)
        polled = _polled(descriptor)  # once: a descriptor may declare 100,000 capabilities
        unmet = _unmet(descriptor)
        for cap in descriptor.capabilities or []:
            if cap.id in polled:
                continue  # checked through the capability it polls
            self.check_capability(
                descriptor, cap, unmet=unmet, examples=examples, seed=seed, approve=approve,
                boundaries=boundaries, budget=budget,
            )  # fmt: skip
        self.rows.append(self.coverage(descriptor, polled))
        return self.rows

    def add(
        self, check: str, status: Status, *, capability: str = "", path: str = "",
        detail: str = "",
    ) -> None:
        self.rows.append(result(check, status, capability=capability, path=path, detail=detail))

    # -- describe -----------------------------------------------------------------------

    def check_describe(self) -> Descriptor | None:
        # two runs side by side, one per host, so both hosts hold the descriptor afterwards;
        # then one for what the module printed, the keys no field names (.check_keys): after
        # them, since sandboxes first set up side by side in a fresh cache can collide
        with ThreadPoolExecutor(max_workers=2) as pool:
            one, two = (pool.submit(h.describe, self.module_id) for h in (self.host, self.job_host))
        printed = raw_describe(self.folder, self.policy)
        keys = key_rows(printed)
        try:
            first = one.result()
        except InvalidDescriptor as exc:
            self.refused(exc, printed)
            self.rows.extend(keys)
            return None
        for check in _DESCRIBE_RULES:
            self.add(check, "pass")
        second = two.result()
        digests = descriptor_digest(first), descriptor_digest(second)
        if digests[0] == digests[1]:
            self.add("describe.stable", "pass", detail=digests[0])
        else:
            self.add("describe.stable", "fail", detail="two runs gave {} and {}".format(*digests))
        self.rows.extend(keys)
        return second

    def refused(self, exc: InvalidDescriptor, printed: Any) -> None:
        """A failed row per breach the host named (with the misspelt key behind it, if one
        is); the other describe rules held when the descriptor was read, since the host then
        applied each and names every breach, else they are skipped."""
        failed = set()
        unknown = unknown_keys(printed)
        for error in exc.errors:
            check = describe_rule_for_path(error.path, error.detail)
            failed.add(check)
            self.add(check, "fail", path=error.path,
                     detail=error.detail + _misspelt(error.path, unknown))  # fmt: skip
        held = descriptor_read(printed) and "describe.runs" not in failed
        for check in _DESCRIBE_RULES:
            if check in failed:
                continue
            if held:
                self.add(check, "pass")
            else:
                self.add(check, "skipped", detail="describe was refused; fix it first")

    def check_documents(self, descriptor: Descriptor) -> None:
        """Load every overlay and skill the way the host does (beneath the module folder,
        no link out of it, SHA-256 against the declared digest) and report each refusal."""
        host = self.host
        declared = descriptor.agent_overlays or []
        overlays = [(i, d, host.load_overlay) for i, d in enumerate(declared)]
        skills = [(i, d, host.load_skill) for i, d in enumerate(descriptor.skills or [])]
        if not overlays and not skills:
            self.add("descriptor.document_digests", "pass", detail="no skills or overlays")
        for kind, documents in (("agent_overlays", overlays), ("skills", skills)):
            for index, doc, load in documents:
                where = f"{kind}[{index}].digest"
                try:
                    load(self.module_id, doc.id)
                except ModuleHostError as exc:
                    # a file missing or out of reach is its path's fault, not its digest's
                    digest = exc.code == "digest_mismatch"
                    check = "descriptor.document_digests" if digest else (
                        "descriptor.documents_confined")  # fmt: skip
                    self.add(check, "fail", path=where if digest else f"{kind}[{index}].path",
                             detail=f"{exc.code}: {exc.message}")  # fmt: skip
                else:
                    self.add("descriptor.document_digests", "pass", path=where, detail=doc.path)

    def scratch_policy(self, descriptor: Descriptor, *, persistent_writes: bool) -> Policy:
        """The policy with unmapped declared roots mapped to one scratch folder per name.

        Read roots always get an (empty) folder, so a module sees every root it declared;
        write roots only with ``persistent_writes``, otherwise each call gets fresh ones.
        """
        roots: dict[str, Any] = dict(self.policy.roots)
        perms = descriptor.permissions
        names = list(perms.filesystem_read or [])
        if persistent_writes:
            names += list(perms.filesystem_write or [])
        for name in names:
            if name != "staged" and self.policy.root_path(name) is None:
                folder = self.roots / name
                folder.mkdir(parents=True, exist_ok=True)
                roots[name] = folder
        return replace(self.policy, roots=roots)

    # -- capabilities -------------------------------------------------------------------

    def check_capability(
        self, descriptor: Descriptor, cap: Capability, *, unmet: str, examples: int,
        seed: int, approve: set[str], boundaries: int, budget: float,
    ) -> None:
        """The rows of one capability; ``unmet``: the module's unmet requirements in words
        (:func:`_unmet`), empty when it needs no setup."""
        if unmet:
            self.add("invoke.requirements", "skipped", capability=cap.id, detail=unmet)
            return
        # the policy's rule on the descriptor in hand (host.approval_reasons runs describe
        # again: once per capability, hours for a module declaring thousands); the checker's
        # host has no standing approval but the policy's allow-list
        policy = self.host.policy
        reasons = [] if cap.id in policy.approved else policy.approval_reasons(descriptor, cap)
        if reasons and cap.id not in approve:
            reasons = [clipped(r, _REASON_CHARS) for r in reasons]
            detail = (f"needs approval ({'; '.join(reasons)}); approve it to check it: "
                      f"--approve {cap.id} (murmur-nb check), --modproto-approve {cap.id} "
                      f"(pytest), approve=[{cap.id!r}] (check_module)")  # fmt: skip
            self.add("invoke.approval", "skipped", capability=cap.id, detail=detail)
            return
        schema = (descriptor.request_schemas or {}).get(cap.request_schema, {})
        planned = generated_inputs(schema, examples=examples, seed=seed, boundaries=boundaries)
        inputs = planned.sent
        broken = invalid_examples(schema, inputs[0].value if inputs else {})
        approved = cap.id in approve
        clock = Budget(budget, self.host.policy.deadline_ms)  # for the calls, from now on
        runs = CapabilityRuns(cap, self.reproduction(cap.id, approved), clock, planned)

        # one pool for both kinds, so the refused inputs fill the generated ones' tail
        with ThreadPoolExecutor(max_workers=_WORKERS) as pool:
            sent = pool.map(lambda g: self.attempt(self.host, cap.id, g.value, approved, clock),
                            inputs)  # fmt: skip
            refused = pool.map(
                lambda v: self.attempt(self.host, cap.id, v, approved, clock, validate=False),
                [value for _, value in broken],
            )
            for generated, outcome in zip(inputs, sent, strict=True):
                runs.record(generated, outcome)
            answers = list(refused)
        kept = [(b, a) for b, a in zip(broken, answers, strict=True) if not isinstance(a, str)]
        runs.left["refused"] += len(broken) - len(kept)
        self.rows.extend(runs.rows())
        self.inputs[cap.id] = dict(runs.kinds)
        if +runs.left:
            self.left_out[cap.id] = dict(runs.left)
        if broken and not kept:
            detail = (f"refused inputs not sent: {clock.words()} was spent before they could "
                      f"run ({len(broken)} left out)")  # fmt: skip
            self.add("invoke.invalid_input", "skipped", capability=cap.id, detail=detail)
        self.rows.extend(self.invalid_input_rows(
            cap, [b for b, _ in kept], [a for _, a in kept], approved))  # fmt: skip
        if cap.long_running and cap.poll_capability:
            self.check_poll(descriptor, cap, runs.last_ok, approve, clock)

    def coverage(self, descriptor: Descriptor, polled: set[str]) -> CheckResult:
        """``invoke.coverage``: whether any capability was invoked with a generated input (a
        check of none passes nothing), and why each was not."""
        caps = [c for c in descriptor.capabilities or [] if c.id not in polled]
        if not caps:
            return result("invoke.coverage", "warn", detail=(
                "the descriptor declares no capabilities, so nothing was invoked and no "
                "invoke rule was looked at"))  # fmt: skip
        invoked = [c for c in caps if sum(self.inputs.get(c.id, {}).values())]
        if invoked:
            detail = f"{len(invoked)} of {_capabilities(len(caps))} invoked with generated inputs"
            return result("invoke.coverage", "pass", detail=detail)
        why = self.not_invoked()
        listed = "; ".join(f"{c.id}: {why.get(c.id, 'no input was sent')}" for c in caps)
        return result("invoke.coverage", "warn",
                      detail=f"no capability was invoked with a generated input ({listed})")

    def not_invoked(self) -> dict[str, str]:
        """Why each capability got no generated input: the first of its rows that did not
        pass, by name (that row says why); read in one pass over the rows."""
        why: dict[str, str] = {}
        for row in self.rows:
            if row.capability and row.status != "pass" and row.capability not in why:
                status = "failed" if row.status == "fail" else row.status
                why[row.capability] = f"see {row.check}, {status}"
        return why

    def attempt(
        self, host: ModuleHost, capability: str, value: Any, approve: bool, clock: Budget, *,
        validate: bool = True,
    ) -> Invocation | ModuleHostError | LeftOut:
        """One call within what is left of ``clock``: its outcome, or why it has none."""
        deadline_ms = clock.call_deadline_ms()
        if deadline_ms is None:
            return "unsent"
        outcome = self.invoke(host, capability, value, approve, validate=validate,
                              deadline_ms=deadline_ms)  # fmt: skip
        return "stopped" if clock.stopped(deadline_ms, outcome) else outcome

    @staticmethod
    def invoke(
        host: ModuleHost, capability: str, value: Any, approve: bool, *, validate: bool = True,
        deadline_ms: int | None = None,
    ) -> Invocation | ModuleHostError:
        try:
            return host.invoke(capability, value, approve=approve, validate_input=validate,
                               deadline_ms=deadline_ms)  # fmt: skip
        except (ApprovalRequired, MissingRequirement, ModuleNotFound):
            raise
        except ModuleHostError as exc:
            return exc

    def reproduction(self, capability: str, approve: bool) -> Reproduce:
        """A function giving the one-line command that sends one input again, after the check
        too: to the home the module is installed in, else to its folder as it is
        (``murmur-nb --module-dir``); an input the schema refuses goes with ``--no-validate``,
        as the check sent it (it was a ``python -c`` line of some 400 characters)."""
        if self.source_home is not None:
            where = ["--home", str(self.source_home)]
        else:
            where = ["--module-dir", str(self.source)]
        flags = ["--approve"] if approve else []

        def line(value: Any, validate: bool) -> str:
            text = printable_json(value, separators=(",", ":"))
            unchecked = [] if validate else ["--no-validate"]
            return shlex.join(["murmur-nb", *where, "invoke", capability, text, *flags,
                               *unchecked])  # fmt: skip

        return line

    def invalid_input_rows(
        self, cap: Capability, broken: list[tuple[str, Any]],
        outcomes: list[Invocation | ModuleHostError], approved: bool,
    ) -> list[CheckResult]:
        """The module's answers to inputs its schema refuses: one row per outcome kind,
        naming every input."""
        reproduce = self.reproduction(cap.id, approved)
        folded: dict[tuple[str, Status, str], list[tuple[str, str, Any, Any]]] = {}
        for (how, value), outcome in zip(broken, outcomes, strict=True):
            key, note = _invalid_input_outcome(outcome)
            folded.setdefault(key, []).append((how, note, value, outcome))
        rows = []
        for (check, status, path), notes in folded.items():
            if status == "fail" or check == "invoke.no_envelope":  # one breach, named once
                hows = ", ".join(how for how, *_ in notes)
                detail = f"answering inputs its schema refuses ({hows}): {notes[0][1]}"
            else:
                detail = "; ".join(f"{how} -> {note}" for how, note, *_ in notes)
            _, _, first, outcome = notes[0]
            if status == "pass":
                rows.append(result(check, status, capability=cap.id, path=path, detail=detail))
                continue
            rows.append(result(
                check, status, capability=cap.id, path=path, detail=detail,
                reproduce=reproduce(first, False), sent=first, **evidence(outcome),
            ))  # fmt: skip
        return rows

    def check_poll(
        self, descriptor: Descriptor, cap: Capability, ok: Generated | None, approve: set[str],
        clock: Budget,
    ) -> None:
        """Start the long-running capability once more on write roots that persist (its
        generated inputs ran on fresh ones, side by side), then call its poll capability."""
        poll = descriptor.capability(cap.poll_capability or "")
        started = (
            self.attempt(self.job_host, cap.id, ok.value, cap.id in approve, clock)
            if ok is not None and poll is not None else None
        )  # fmt: skip
        if poll is None or ok is None or not isinstance(started, Invocation) or not started.ok:
            detail = "no successful call of the long-running capability to poll"
            if isinstance(started, str):
                detail += f": {clock.words()} was spent"
            elif ok is not None and started is not None:
                detail += f"; started again with the {ok.shown()}: {_answer(started)}"
            self.add("invoke.poll", "skipped", capability=cap.id, detail=detail)
            return
        schema = (descriptor.request_schemas or {}).get(poll.request_schema, {})
        value = poll_request(schema, started.result)
        outcome = self.attempt(self.job_host, poll.id, value, poll.id in approve, clock)
        if isinstance(outcome, str):
            detail = f"{poll.id} was not answered before {clock.words()} was spent"
            self.add("invoke.poll", "skipped", capability=cap.id, detail=detail)
        elif isinstance(outcome, Invocation):
            shown = json.dumps(value, ensure_ascii=False)
            detail = f"{poll.id} answered ({_answer(outcome)}) to {shown}"
            self.add("invoke.poll", "pass", capability=cap.id, detail=detail)
        else:
            detail = f"{poll.id}: {outcome.code}: {outcome.message}"
            self.add("invoke.poll", "fail", capability=cap.id, detail=detail)


class Generated:
    """One input the checker sends: the value, its kind (a boundary kind or ``random``) and
    where in the value the boundary is."""

    __slots__ = ("kind", "value", "where")

    def __init__(self, kind: str, where: str, value: Any) -> None:
        self.kind, self.where, self.value = kind, where, value

    def shown(self) -> str:
        text = json.dumps(self.value, ensure_ascii=False)
        text = text if len(text) <= 120 else f"{text[:120]}... ({len(text)} characters)"
        at = f" at {self.where}" if self.where else ""
        return f"{self.kind} input{at} {text}"


@dataclass(frozen=True, slots=True)
class Planned:
    """The inputs a capability is sent (``sent``), and why there are none or fewer: no input
    satisfies its schema (``unsatisfiable``, where), or the generator could not follow it
    (``problem``)."""

    sent: list[Generated]
    unsatisfiable: str = ""
    problem: str = ""


def generated_inputs(schema: Any, *, examples: int, seed: int, boundaries: int) -> Planned:
    """The boundary inputs of ``schema`` (at most ``boundaries``), then ``examples`` seeded
    random ones that are not already among them; never raises for a schema."""
    edges = boundary_examples(schema, limit=boundaries)
    sent = [Generated(b.kind, b.where, b.value) for b in edges]
    seen = {json.dumps(g.value, sort_keys=True) for g in sent}
    drawn = valid_examples(schema, count=examples, seed=seed)
    for value in drawn.values:
        if json.dumps(value, sort_keys=True) not in seen:
            sent.append(Generated("random", "", value))
    return Planned(sent, drawn.unsatisfiable, drawn.problem)


def _invalid_input_outcome(
    outcome: Invocation | ModuleHostError,
) -> tuple[tuple[str, Status, str], str]:
    """(check, status, path) for a module's answer to a refused input, and a note on it."""
    if isinstance(outcome, ProtocolViolation) and outcome.rule == _NO_ENVELOPE:
        return ("invoke.no_envelope", "warn", _NO_ENVELOPE), f"no envelope: {outcome.message}"
    if isinstance(outcome, Invocation) and not outcome.ok:
        code = outcome.error.code if outcome.error else ""
        return ("invoke.invalid_input", "pass", ""), f"ok: false, {code}"
    if isinstance(outcome, Invocation):
        return ("invoke.invalid_input", "warn", ""), "ok: true for an input it should refuse"
    if isinstance(outcome, ProtocolViolation) and outcome.rule not in _CRASH_RULES:
        # it answered, but its error envelope breaks a rule: that is a failure
        return (envelope_rule(outcome.rule), "fail", outcome.rule), outcome.message
    return ("invoke.invalid_input", "warn", ""), f"{outcome.code}: {outcome.message}"


def key_rows(printed: Any) -> list[CheckResult]:
    """``descriptor.unknown_keys``: a warning per key no field of its level names, else one
    pass; skipped when describe printed no JSON to read."""
    if not isinstance(printed, dict):
        return [result("descriptor.unknown_keys", "skipped",
                       detail="describe printed no JSON envelope to read keys from")]  # fmt: skip
    unknown = unknown_keys(printed)
    if not unknown:
        return [result("descriptor.unknown_keys", "pass",
                       detail="every key is one the modproto seed defines")]  # fmt: skip
    return [result("descriptor.unknown_keys", "warn", path=u.path, detail=u.words())
            for u in unknown]  # fmt: skip


def _misspelt(path: str, unknown: list[UnknownKey]) -> str:
    """``; the module wrote 'request_shema': did you mean 'request_schema'?`` when a key
    beside the field the host names at ``path`` is that field misspelt, else empty."""
    parent, _, field = path.rpartition(".")
    for key in unknown:
        if key.parent == parent and key.meant == field:
            return f"; the module wrote {key.key!r} there: did you mean {field!r}?"
    return ""


def _unmet(descriptor: Descriptor) -> str:
    """The module's unmet requirements in words, empty when it has none: the first
    :data:`_LISTED` of them, each cut to a label's length, and how many more (every
    capability's skipped row says it; a requirement's megabytes, once per capability, made
    gigabytes of report)."""
    unmet = [r for r in descriptor.requirements or [] if not r.available]
    words = [f"{clipped(r.kind)} {clipped(r.name)}: {clipped(r.detail or 'not available')}"
             for r in unmet[:_LISTED]]  # fmt: skip
    if len(unmet) > _LISTED:
        words.append(f"and {len(unmet) - _LISTED} more (the descriptor's requirements)")
    return "; ".join(words)


def _polled(descriptor: Descriptor) -> set[str]:
    """The poll capabilities of the long-running ones (checked through what they poll)."""
    return {c.poll_capability for c in descriptor.capabilities or [] if c.long_running}


def _capabilities(n: int) -> str:
    return f"{n} capabilit{'y' if n == 1 else 'ies'}"


def _answer(outcome: Invocation | ModuleHostError) -> str:
    """A few words on how a call ended: ``ok``, its error code, or the host's refusal."""
    if isinstance(outcome, ModuleHostError):
        return f"{outcome.code}: {outcome.message}"
    return "ok" if outcome.ok else f"error {outcome.error.code if outcome.error else ''}"



class CapabilityRuns:
    """The outcomes of one capability's generated inputs, folded into one row per rule."""

    def __init__(self, cap: Capability, reproduce: Reproduce, clock: Budget,
                 planned: Planned) -> None:  # fmt: skip
        self.cap = cap
        self.reproduce = reproduce
        self.clock = clock
        self.planned = planned
        #: Inputs left out when the budget was spent: ``boundary``, ``random``, ``refused``.
        self.left: Counter[str] = Counter()
        self.failed: dict[str, CheckResult] = {}
        self.warned: dict[str, str] = {}
        self.kinds: Counter[str] = Counter()
        self.sent = 0
        self.answered = 0
        self.last_ok: Generated | None = None
        #: the first input whose call the budget's deadline stopped (it ran until then)
        self.stopped: Generated | None = None

    def fail(
        self, check: str, path: str, detail: str, sent: Generated,
        outcome: Invocation | ModuleHostError,
    ) -> None:
        """Keep the first failure of ``check`` (boundary inputs come first)."""
        if check not in self.failed:
            self.failed[check] = result(
                check, "fail", capability=self.cap.id, path=path, detail=detail,
                reproduce=self.reproduce(sent.value, True), sent=sent.value,
                **evidence(outcome),
            )  # fmt: skip

    def record(self, sent: Generated, outcome: Invocation | ModuleHostError | LeftOut) -> None:
        if isinstance(outcome, str):
            self.left["random" if sent.kind == "random" else "boundary"] += 1
            if outcome == "stopped" and self.stopped is None:
                self.stopped = sent
            return
        self.sent += 1
        self.kinds[sent.kind] += 1
        shown = sent.shown()
        if isinstance(outcome, InvalidInput):
            self.warned.setdefault(
                "invoke.generated_inputs",
                f"the host refused a generated input ({outcome.message[:160]})",
            )
            return
        if isinstance(outcome, ProtocolViolation) and outcome.rule == _NO_ENVELOPE:
            detail = f"printed no envelope for the {shown}: {outcome.message}"
            self.fail("invoke.no_envelope", outcome.rule, detail, sent, outcome)
            return
        if isinstance(outcome, ProtocolViolation):
            check = envelope_rule(outcome.rule)
            self.fail(check, outcome.rule, f"{shown}: {outcome.message}", sent, outcome)
            return
        if isinstance(outcome, ModuleHostError):
            check = "invoke.bounds" if outcome.code == "deadline_exceeded" else "invoke.envelope"
            self.fail(check, "", f"{shown}: {outcome.code}: {outcome.message}", sent, outcome)
            return
        self.answered += 1
        self.record_invocation(outcome, sent)

    def record_invocation(self, inv: Invocation, sent: Generated) -> None:
        if inv.ok:
            self.last_ok = sent
        shown = sent.shown()
        for warning in inv.warnings:
            if warning.startswith("result does not match result_schema"):
                self.fail("invoke.result_schema", "result", f"{shown}: {warning}", sent, inv)
        for rejected in inv.rejected_artifacts:
            where = f"execution.artifacts[{rejected.artifact.id!r}]"
            detail = f"{shown}: {rejected.code}: {rejected.message}"
            self.fail("invoke.artifacts_verify", where, detail, sent, inv)
        declared = set(self.cap.artifact_schemas or [])
        produced = inv.envelope.execution.artifacts if inv.envelope else None
        for i, artifact in enumerate(produced or []):
            where = f"execution.artifacts[{i}]"
            if artifact.kind not in declared:
                detail = f"kind {artifact.kind!r} is not in artifact_schemas {sorted(declared)!r}"
                self.fail("invoke.artifact_kinds", where + ".kind", detail, sent, inv)
            _, ignored = resolve(artifact.presentation, artifact.media_type)
            if artifact.presentation and ignored:  # unknown, or not one the type can honour
                self.warned.setdefault("invoke.presentation", f"{where}.presentation: {ignored}")

    def never_answered(self) -> CheckResult | None:
        """An ``invoke.bounds`` failure when no call was answered and the budget's deadline
        stopped them: a module that never answers is killed at any deadline, so it passed
        (every call was left out as "the budget stopped it")."""
        if self.answered or self.sent or self.stopped is None:
            return None
        detail = (
            f"no call answered: each generated input's call ran until its deadline (within "
            f"{self.clock.words()}) and was killed. A module must answer within deadline_ms; "
            "if a call of this capability takes longer than the budget allows, check it "
            "again with a larger --budget"
        )
        return result("invoke.bounds", "fail", capability=self.cap.id, detail=detail,
                      reproduce=self.reproduce(self.stopped.value, True),
                      sent=self.stopped.value)  # fmt: skip

    def unanswered(self) -> str:
        """Why a rule could not be looked at: no call of the capability was answered."""
        if self.planned.unsatisfiable:
            return "no input satisfies the request schema, so none was sent"
        if not self.planned.sent and self.planned.problem:
            return "no input could be generated from the request schema, so none was sent"
        if self.stopped is not None:
            return "no generated input was answered: each call ran until its deadline"
        if +self.left:
            return f"no generated input reached the module ({self.clock.words()} was spent)"
        return "no generated input was answered with an envelope these rules could look at"

    def counts(self) -> str:
        """How many inputs of each kind were sent: boundaries by kind, then random ones."""
        edges = [(k, self.kinds[k]) for k in KINDS if self.kinds[k]]
        total = sum(n for _, n in edges)
        listed = ", ".join(f"{k} {n}" for k, n in edges)
        boundary = f"{total} boundary ({listed})" if total else "0 boundary"
        left = sum(self.left.values())
        out = f"; {left} left out: {self.clock.words()} was spent" if left else ""
        return f"{boundary} then {self.kinds['random']} random{out}"

    def generation(self) -> CheckResult | None:
        """``invoke.generated_inputs`` when generating fell short: a failure when no input
        satisfies the schema, a warning when the generator could not follow it."""
        cap, planned = self.cap, self.planned
        if planned.unsatisfiable:
            return result("invoke.generated_inputs", "fail", capability=cap.id,
                          path=f"request_schemas.{cap.request_schema}",
                          detail=f"no input satisfies this schema: {planned.unsatisfiable}")
        if not planned.problem:
            return None
        sent = f"; {self.counts()} were sent" if self.sent else "; no input was sent"
        detail = (f"could not generate inputs for {cap.id}'s request_schema "
                  f"{cap.request_schema!r}: {planned.problem}{sent}")  # fmt: skip
        return result("invoke.generated_inputs", "warn", capability=cap.id, detail=detail)

    def rows(self) -> Sequence[CheckResult]:
        out: list[CheckResult] = []
        cap = self.cap.id
        hung = self.never_answered()
        generation = self.generation()
        for check in _INVOKE_RULES:
            if check == "invoke.generated_inputs" and generation is not None:
                out.append(generation)
            elif check in self.failed:
                out.append(self.failed[check])
            elif check == "invoke.bounds" and hung is not None:
                out.append(hung)
            elif check in self.warned:
                out.append(result(check, "warn", capability=cap, detail=self.warned[check]))
            elif self.answered == 0 and (check != "invoke.generated_inputs" or +self.left):
                out.append(result(check, "skipped", capability=cap, detail=self.unanswered()))
            else:
                detail = f"{self.answered} of {self.sent} inputs answered: {self.counts()}"
                out.append(result(check, "pass", capability=cap, detail=detail))
        return out
