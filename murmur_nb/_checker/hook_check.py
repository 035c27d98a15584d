"""The hook checker: a hook component against every rule of the ``hook`` world, as a report.

Design notes
------------
* **The same host.** Calls go through :class:`HookHost` with the limits of the hook's
  ``murmur.yaml`` entry (or the defaults), against real records in a temporary murmur home
  (:mod:`.hook_cases`), so what passes here passes in a capsule. One host holds the hook with
  the ``read`` grant, another without it.
* **Rules by outcome.** Every call's result code decides which rule it speaks to: a trap or
  ``err`` is ``handlers.answer``; a limit code is ``limits``; a value the host cannot use is
  ``messages.well_formed``. So a hook with one fault fails one rule.
* **Twice, to see determinism.** Every case is driven twice (task start, then compaction, as
  a runtime does); the two answers of each call must match, unless a limit cut one of them.
* **One answer at a time.** An answer may hold the whole result limit (16 MiB of text, 64 MiB
  as Python text), and a check makes 30 calls: as each call returns, what the rules need of
  its answer is taken (a digest, a short summary, the problem with its messages, its error
  cut) and the answer dropped, so the checker holds one, not all 30 (2 GB).
* The world (exports, imports) is read from the component's type before anything runs
  (:mod:`.hook_world`); a component that does not load skips the rules that need calls.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from murmur_nb._checker.hook_cases import CASES, Case, read_back, write_cases
from murmur_nb._checker.hook_report import HookCheckReport, HookCheckResult, HookStatus
from murmur_nb._checker.hook_rules import CALL_CODES, HOOK_RULES, LIMIT_CODES
from murmur_nb._checker.hook_world import export_problems, import_problems
from murmur_nb._conversations.budget import ReadBudget
from murmur_nb._conversations.store import ConversationStore, Message
from murmur_nb._conversations.tool_envelope import decode as decode_tool_envelope
from murmur_nb._exceptions import ConversationReadError, HookConfigError, HookError
from murmur_nb._files.scratch import temp_folder
from murmur_nb._hooks.config import EVENTS, HookConfig, HookEntry, HookLimits, load_hook_config
from murmur_nb._hooks.guest_code.bounding import Unbounded, rewrite_for
from murmur_nb._hooks.host import FUNCS, HookHost
from murmur_nb._hooks.results import HookResult
from murmur_nb._hooks.runtime import Runtime
from murmur_nb._progress import Progress, progress_bar
from murmur_nb._rules import clipped, compact_json, one_line, printable

__all__ = ["check_hook"]

_ROUNDS = 2
#: The cases the hook without the grant is driven on.
_DENIED_CASES = ("one",)
_SHOWN = 3
#: Characters of a returned id a row names (an id may be megabytes: the result limit's).
_ID_CHARS = 80
#: Characters of a call's error kept (rows quote at most 300, from its first 2,401).
_ERROR_CHARS = 4096


@dataclass(frozen=True)
class Call:
    """One handler call of the check: on which case, its result without its payload (the
    error cut), and what the rules need of what it answered: a digest, a short summary and,
    for a list of messages, the problem with it (:func:`taken` makes one)."""

    case: Case
    event: str
    result: HookResult
    answer: str = ""
    said: str = ""
    problem: str | None = None

    @property
    def where(self) -> str:
        return f"{FUNCS[self.event]} on '{self.case.name}' ({self.case.about})"


def row(check: str, status: HookStatus, detail: str) -> HookCheckResult:
    """A rule's row. ``detail`` quotes the hook (its errors, its stderr, its ids), and every
    view prints it (the text report and pytest to a terminal): its control characters and
    bidirectional overrides are escaped here, once, after each quote was cut."""
    rule = HOOK_RULES[check]
    return HookCheckResult(check, status, printable(detail), rule.text, rule.fix)


def shown_id(message_id: str) -> str:
    """A returned message's id as a row quotes it: cut, then ``repr``'d."""
    return repr(clipped(message_id, _ID_CHARS))


def check_hook(
    component: str | os.PathLike[str],
    *,
    config: str | os.PathLike[str] | None = None,
    hook_id: str | None = None,
    progress: Progress = "auto",
) -> HookCheckReport:
    """Check a hook component against the ``hook`` world's rules; return the report.

    Parameters
    ----------
    component
        The hook's ``.wasm`` component (``mnb.build_python_hook`` returns one).
    config
        A ``murmur.yaml`` whose limits the calls run under: those of the entry naming this
        component (or ``hook_id``), else the file's ``hook_limits``; default: the built-in
        limits.
    hook_id
        Which entry of ``config`` gives the limits, when several name the component.
    progress
        A bar of the calls (about 30; the 10,000-message ones take seconds), by the one
        policy of a batch and a replay: ``"auto"`` draws a notebook bar in a kernel and a
        text bar in a terminal, none into a pipe; ``True`` always, ``False`` never.

    Returns
    -------
    HookCheckReport
        One row per rule; ``report.ok`` is false when any rule failed.

    Raises
    ------
    HookError
        ``component`` is not a file.
    HookConfigError
        ``config`` cannot be used, or has no entry ``hook_id``.

    Examples
    --------
    >>> report = mnb.check_hook("hooks/summarize.wasm")  # doctest: +SKIP
    >>> report.ok, [r.check for r in report.failures]  # doctest: +SKIP
    """
    started = time.monotonic()
    path = Path(component).expanduser().resolve()
    if not path.is_file():
        raise HookError(
            f"{path} is not a file; pass the .wasm component of a built hook "
            "(mnb.build_python_hook returns its path)",
            code="hook_not_found",
        )
    limits = _limits(path, config, hook_id)
    bar = _bar(path.name, progress)
    try:
        with tempfile.TemporaryDirectory(prefix="murmur-nb-check-hook-", dir=temp_folder()) as tmp:
            checked = _check(path, limits, Path(tmp), bar.update if bar else None)
    finally:
        if bar is not None:
            bar.close()
    return HookCheckReport(
        path,
        results=checked.results,
        duration_s=time.monotonic() - started,
        digest=checked.digest,
        limits=limits.model_dump(),
        cases=checked.cases,
        calls=checked.calls,
    )


def _limits(path: Path, config: str | os.PathLike[str] | None, hook_id: str | None) -> HookLimits:
    if config is None:
        if hook_id is not None:
            raise HookConfigError(
                "hook_id= names an entry of a murmur.yaml; pass config= (its path) too"
            )
        return HookLimits()
    loaded = load_hook_config(Path(config))
    if hook_id is not None:
        for entry in loaded.hooks:
            if entry.id == hook_id:
                return entry.limits
        names = ", ".join(e.id for e in loaded.hooks) or "none"
        raise HookConfigError(f"{loaded.path} has no hook {hook_id!r} (it has: {names})")
    for entry in loaded.hooks:
        if entry.component.expanduser().resolve() == path:
            return entry.limits
    return loaded.default_limits


def _bar(name: str, progress: Progress) -> Any:
    """A bar of the calls when the progress policy wants one here, else ``None``."""
    total = len(CASES) * 2 * _ROUNDS + len(_DENIED_CASES) * 2
    return progress_bar(total, desc=f"check-hook {name}", unit="call", progress=progress)


@dataclass(frozen=True)
class Checked:
    """What :func:`_check` found: the rows, and what the report says it ran."""

    results: list[HookCheckResult]
    digest: str = ""
    cases: dict[str, int] = field(default_factory=dict)
    calls: int = 0


@dataclass(frozen=True)
class Runs:
    """Every call of the check: two rounds with the grant (a case a limit stopped is the same
    :class:`Call` in both), one without, and how often a read was answered ``not-granted``."""

    rounds: tuple[list[Call], list[Call]]
    denied: list[Call]
    denied_reads: int

    @property
    def granted(self) -> list[Call]:
        """The calls made with the grant, each once."""
        first, again = self.rounds
        return [*first, *(two for one, two in zip(first, again, strict=True) if one is not two)]


def _check(
    path: Path, limits: HookLimits, tmp: Path, tick: Callable[[int], object] | None
) -> Checked:
    runtime = Runtime.get()
    try:
        try:  # the variant the host runs (compact's result bounded in the guest), if it can
            loaded = runtime.cache.load(path, rewrite=rewrite_for(limits.result_messages))
        except Unbounded:  # the host refuses to load it: the calls' rows say why
            loaded = runtime.cache.load(path)
    except (OSError, runtime.WasmtimeError) as exc:
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return Checked([
            row("world.exports", "fail", f"{path.name} is not a loadable component: {why}"),
            *_skipped(("world.imports", *_CALL_RULES), "the file is not a component"),
        ])  # fmt: skip
    world = _world_rows(loaded.component, runtime.engine)
    store = write_cases(tmp / "murmur")
    cases = {case.name: len(read_back(store, case)) for case in CASES}
    runs = _run(path, limits, store, tick)
    if isinstance(runs, tuple):  # the host did not load the hook: why, as rows
        return Checked(_load_failed(world, runs), loaded.digest, cases)
    calls = runs.granted
    return Checked(
        [
            *world,
            _answers(calls),
            _within_limits(calls, limits),
            _determinism(runs.rounds),
            _well_formed(calls),
            _not_granted(runs.denied, runs.denied_reads),
        ],
        loaded.digest,
        cases,
        len(calls) + len(runs.denied),
    )


def _run(
    path: Path,
    limits: HookLimits,
    store: ConversationStore,
    tick: Callable[[int], object] | None,
) -> Runs | tuple[str, str]:
    """Drive the hook with and without the grant; ``(error, code)`` when it does not load."""
    source = _CountingStore(store)
    granted, denied = (
        HookHost(_config(path, limits, read), conversations=source) for read in (True, False)
    )
    with granted, denied:
        info = granted.hooks["hook"]
        if not info.loaded:
            return info.load_error or "", info.load_code or "load_failed"
        first = _drive(granted, store, CASES, tick)
        again = _drive(granted, store, CASES, tick, first)
        without = _drive(denied, store, [c for c in CASES if c.name in _DENIED_CASES], tick)
    return Runs((first, again), without, source.denied)


_CALL_RULES = ("handlers.answer", "limits", "determinism", "messages.well_formed",
               "grant.not_granted")  # fmt: skip


def _skipped(checks: Iterable[str], why: str) -> list[HookCheckResult]:
    return [row(check, "skipped", f"not run: {why}") for check in checks]


def _config(path: Path, limits: HookLimits, read: bool) -> HookConfig:
    entry = HookEntry(id="hook", component=path, events=EVENTS, read_granted=read, limits=limits)
    return HookConfig(path=None, transport="api", default_limits=limits, hooks=(entry,))


def _world_rows(component: Any, engine: Any) -> list[HookCheckResult]:
    exports, others = export_problems(component, engine)
    imports, names = import_problems(component, engine)
    also = f"; it also exports {', '.join(others)}, which the host ignores" if others else ""
    return [
        row("world.exports", "fail", "; ".join(exports)) if exports else
        row("world.exports", "pass", f"on-task-start and on-compact have the world's "
            f"signatures{also}"),
        row("world.imports", "fail", "; ".join(imports)) if imports else
        row("world.imports", "pass", f"{len(names)} imports, all linked by the host: "
            + _imports_in_short(names)),
    ]  # fmt: skip


def _imports_in_short(names: list[str]) -> str:
    """The murmur imports by name, WASI ones by package: ``wasi (25: cli, clocks, ...)``."""
    wasi = [n for n in names if n.startswith("wasi:")]
    packages = sorted({n.split(":", 1)[1].split("/", 1)[0] for n in wasi})
    shown = [n for n in names if not n.startswith("wasi:")]
    if wasi:
        shown.append(f"{len(wasi)} WASI 0.2 interfaces ({', '.join(packages)})")
    return ", ".join(shown)


def _load_failed(world: list[HookCheckResult], why: tuple[str, str]) -> list[HookCheckResult]:
    """The rows when the host refused to load the hook (``why``: its error and code): blame
    one rule, skip the calls."""
    error, code = why
    if any(r.status == "fail" for r in world):
        return [*world, *_skipped(_CALL_RULES, "the hook does not load (see world.*)")]
    blamed = {"link_error": "world.imports", "load_failed": "world.exports"}.get(
        code, "limits" if code in LIMIT_CODES else "handlers.answer"
    )
    rows = [row(r.check, "fail", f"the host does not load it: {error}")
            if r.check == blamed else r for r in world]  # fmt: skip
    rest = [row(c, "fail", f"the host does not load it: {error}") if c == blamed
            else row(c, "skipped", "not run: the hook does not load") for c in _CALL_RULES]
    return [*rows, *rest]


class _CountingStore:
    """The store's readers, counting the reads answered ``not-granted``."""

    def __init__(self, store: ConversationStore) -> None:
        self.store = store
        self.denied = 0

    def reader(
        self, context_id: str | None, *, granted: bool = True, as_of: int | None = None
    ) -> Any:
        return _CountingReader(self, self.store.reader(context_id, granted=granted, as_of=as_of))


class _CountingReader:
    def __init__(self, source: _CountingStore, inner: Any) -> None:
        self.source = source
        self.inner = inner

    def read_messages(
        self, cursor: str | None, limit: int, *, budget: ReadBudget | None = None
    ) -> Any:
        try:
            return self.inner.read_messages(cursor, limit, budget=budget)
        except ConversationReadError as exc:
            if str(exc) == "not-granted":
                self.source.denied += 1
            raise


def taken(case: Case, event: str, result: HookResult, given: tuple[Message, ...] = ()) -> Call:
    """What the check keeps of one call; ``given`` is what ``on-compact`` was given."""
    problem = None
    if event == "compact" and result.ok:
        problem = message_problem(given, result.value)
    error = None if result.error is None else clipped(result.error, _ERROR_CHARS)
    return Call(case, event, dataclasses.replace(result, value=None, error=error),
                hashlib.sha256(compact_json(_answer(result))).hexdigest(), _said(result),
                problem)  # fmt: skip


def _drive(
    host: HookHost,
    store: ConversationStore,
    cases: Iterable[Case],
    tick: Callable[[int], object] | None = None,
    before: list[Call] | None = None,
) -> list[Call]:
    """Each case as a runtime would: its task starts, then its messages are compacted.

    With ``before`` (the first round), a case a limit stopped there is not run again: its
    calls are ``before``'s (a stopped call says nothing about determinism, and a hook that
    loops would cost its whole time limit twice).
    """
    stopped = {c.case for c in before or () if c.result.code in LIMIT_CODES}
    calls: list[Call] = []
    for case in cases:
        if case in stopped:
            calls.extend(c for c in before or () if c.case == case)
            if tick is not None:
                tick(2)
            continue
        given = tuple(read_back(store, case))
        started = host.task_start(task_id=f"task-{case.name}", context_id=case.context_id)
        calls.append(taken(case, "task-start", started["hook"]))
        calls.append(taken(case, "compact", host.compact(given)["hook"], given))
        if tick is not None:
            tick(2)
    return calls


def _listed(problems: list[str]) -> str:
    shown = "; ".join(problems[:_SHOWN])
    more = len(problems) - _SHOWN
    return shown + (f" (and {more} more)" if more > 0 else "")


def _unique(calls: Iterable[Call], codes: frozenset[str]) -> list[str]:
    seen: dict[str, None] = {}
    for call in calls:
        if call.result.code in codes:
            said = one_line(call.result.error or "", 300)
            seen.setdefault(f"{call.where}: {call.result.code}: {said}")
    return list(seen)


def _answers(calls: list[Call]) -> HookCheckResult:
    bad = _unique(calls, CALL_CODES)
    if bad:
        return row("handlers.answer", "fail", _listed(bad))
    cases = ", ".join(case.name for case in CASES)
    return row("handlers.answer", "pass", f"both handlers answered on {len(CASES)} records "
               f"({cases}), each twice")  # fmt: skip


def _within_limits(calls: list[Call], limits: HookLimits) -> HookCheckResult:
    bad = _unique(calls, LIMIT_CODES)
    if bad:
        return row("limits", "fail", _listed(bad))
    slowest = max(calls, key=lambda c: c.result.duration_ms)
    ms = slowest.result.duration_ms
    detail = f"slowest call {ms:.0f} ms of {limits.time_ms} ms ({slowest.where})"
    if limits.fuel is not None:
        fuel = max(c.result.fuel_used for c in calls)
        detail += f"; most fuel {fuel:,} of {limits.fuel:,}"
    near = ms > limits.time_ms / 2
    return row("limits", "warn" if near else "pass",
               detail + (": over half the time limit" if near else ""))  # fmt: skip


def _answer(result: HookResult) -> tuple[Any, ...]:
    value = result.value
    if isinstance(value, list):
        value = tuple(dataclasses.astuple(m) for m in value)
    return result.ok, result.code, value, result.error if result.code == "guest_error" else None


def _said(result: HookResult) -> str:
    if not result.ok:
        return f"{result.code} ({one_line(result.error or '', 80)})"
    if isinstance(result.value, list):
        ids = ", ".join(clipped(m.id, _ID_CHARS) for m in result.value[:4])
        return f"ok with {len(result.value)} messages ({ids}"\
            + (", ..." if len(result.value) > 4 else "") + ")"
    value = result.value  # a note may be megabytes: cut before repr copies it whole
    return f"ok {one_line(repr(clipped(value, 80) if isinstance(value, str) else value), 80)}"


def _determinism(rounds: tuple[list[Call], list[Call]]) -> HookCheckResult:
    pairs = [
        (one, two) for one, two in zip(*rounds, strict=True)
        if one is not two and not {one.result.code, two.result.code} & LIMIT_CODES
    ]  # fmt: skip
    differ = [f"{one.where}: {one.said}, then {two.said}"
              for one, two in pairs if one.answer != two.answer]  # fmt: skip
    if differ:
        return row("determinism", "fail", _listed(differ))
    left = len(rounds[0]) - len(pairs)
    unsure = f"; {left} not compared, a limit stopped them" if left else ""
    return row("determinism", "pass", f"{len(pairs)} calls made twice gave the same answers"
               + unsure)  # fmt: skip


def message_problem(given: tuple[Message, ...], kept: list[Message]) -> str | None:
    by_id = {m.id: m for m in given}
    seen: set[str] = set()
    for i, message in enumerate(kept):
        if not message.id:
            return f"message {i} has an empty id"
        if message.id in seen:
            return f"id {shown_id(message.id)} is returned twice"
        seen.add(message.id)
        original = by_id.get(message.id)
        if original is not None and original != message:
            changed = [f.name for f in dataclasses.fields(Message)
                       if getattr(original, f.name) != getattr(message, f.name)]  # fmt: skip
            return (f"message {shown_id(message.id)} keeps an input id but changed its "
                    f"{', '.join(changed)}")  # fmt: skip
        if original is None and not message.role:
            return f"new message {shown_id(message.id)} has an empty role"
        if message.role == "tool" and decode_tool_envelope(message.content) is None:
            return (f"tool message {shown_id(message.id)} does not carry the tool-message "
                    "envelope")  # fmt: skip
    return None


def _well_formed(calls: list[Call]) -> HookCheckResult:
    bad: dict[str, None] = dict.fromkeys(_unique(calls, frozenset({"invalid_output"})))
    lists = 0
    for call in calls:
        if call.event == "compact" and call.result.ok:
            lists += 1
            if call.problem is not None:
                bad.setdefault(f"{call.where}: {call.problem}")
    if bad:
        return row("messages.well_formed", "fail", _listed(list(bad)))
    return row("messages.well_formed", "pass", f"{lists} returned lists: ids present and "
               "unique, kept messages unchanged, tool messages in their envelope")  # fmt: skip


def _not_granted(calls: list[Call], denied_reads: int) -> HookCheckResult:
    bad = _unique(calls, LIMIT_CODES | {"trap", "host_error", "invalid_output"})
    if bad:
        return row("grant.not_granted", "fail", f"without the read grant: {_listed(bad)}")
    if not denied_reads:
        return row("grant.not_granted", "pass", "without the read grant the hook answered, and "
                   "it never called read-messages")  # fmt: skip
    answers = "; ".join(f"{FUNCS[c.event]} {c.said}" for c in calls)
    times = "once" if denied_reads == 1 else f"{denied_reads} times"
    return row("grant.not_granted", "pass", f"read-messages answered not-granted {times} and "
               f"the hook went on: {answers}")  # fmt: skip
