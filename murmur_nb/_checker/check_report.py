"""The module checker's report: one row per check, read like a test report.

The report is plain data first (a list of :class:`CheckResult`), so a script, a CI job and a
notebook read the same thing; pandas is imported only by :meth:`CheckReport.to_frame`.

Design notes
------------
* **One order, one content, four views.** Failures come first, then warnings, then skipped
  checks (one line per reason), then the passes folded into one line. A problem shows what
  happened (with the module's exit status and stderr tail when its run failed), the input
  as JSON and a one-line reproduction, the rule and the fix. :meth:`CheckResult.sections`
  is the one list of what a problem shows; the terminal text, ``--json``
  (:meth:`CheckReport.to_json`, whose ``checks`` keep the same order, inputs as JSON
  values), pytest's failure text (:func:`problem_text`) and the HTML (:mod:`.check_html`)
  all read it. ``to_json`` returns text, as pandas' and the protocol models' do;
  ``to_dict`` the data.
* **Fits its output.** Text is wrapped to the terminal's width except the reproduction,
  which stays one line to copy; the HTML is a stack of cards that wraps anywhere.
"""

from __future__ import annotations

import shutil
import signal
import textwrap
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

from murmur_nb._checker.check_html import BLOCKS, report_html
from murmur_nb._rules import printable_json

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["STATUSES", "CheckReport", "CheckResult", "Results", "Status", "problem_text"]

Status = Literal["pass", "fail", "warn", "skipped"]
#: Every status, worst first (the order of the summary line and of the report).
STATUSES: tuple[Status, ...] = ("fail", "warn", "skipped", "pass")


class _Row(Protocol):
    @property
    def status(self) -> Status: ...
    @property
    def check(self) -> str: ...


R = TypeVar("R", bound=_Row)


class Results(Generic[R]):
    """What both checkers' reports share: their rows in ``results``, iterated and counted,
    ``ok`` while none failed, the failures and warnings in order, the count per status, the
    rows worst first and the passes folded into one line (the HTML's view of a report)."""

    results: list[R]

    def __iter__(self) -> Iterator[R]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @property
    def ok(self) -> bool:
        """Whether nothing failed (warnings and skipped checks do not fail)."""
        return not self.failures

    @property
    def failures(self) -> list[R]:
        """The failed rows, in order."""
        return [r for r in self.results if r.status == "fail"]

    @property
    def warnings(self) -> list[R]:
        """The rows that passed with a warning, in order."""
        return [r for r in self.results if r.status == "warn"]

    def counts(self) -> dict[str, int]:
        """How many rows ended in each status (every status present, zero included)."""
        seen = Counter(r.status for r in self.results)
        return {s: seen.get(s, 0) for s in STATUSES}

    def ordered(self) -> list[R]:
        """Every row, worst first (failures, warnings, skipped, passes), else as they ran."""
        return sorted(self.results, key=lambda r: STATUSES.index(r.status))

    def passes_line(self) -> str:
        """The passes folded into one line: ``34 checks passed (describe 3, invoke 20 ...)``."""
        kinds = Counter(r.check.split(".")[0] for r in self.results if r.status == "pass")
        listed = ", ".join(f"{kind} {n}" for kind, n in kinds.items())
        return f"{sum(kinds.values())} checks passed" + (f" ({listed})" if listed else "")

#: An input's pretty JSON is cut after this many characters (the reproduction has it all).
_INPUT_CHARS = 2000


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check: what was checked, how it went, the rule, where it broke and the fix.

    ``path`` is a JSON path into the descriptor or the envelope (like the seed's
    ``ValidationError.Path``), empty when the check is about the module as a whole.
    ``reproduce`` is a one-line command that sends the failing input again, ``input`` that
    input as a JSON value (meaningful only where ``reproduce`` is set), ``returncode`` the
    module's exit status on it (negative: killed by that signal) and ``stderr`` the tail of
    its standard error (control characters escaped).
    """

    check: str
    status: Status
    rule: str
    capability: str = ""
    path: str = ""
    detail: str = ""
    fix: str = ""
    reproduce: str = ""
    stderr: str = ""
    input: Any = None
    returncode: int | None = None

    def line(self) -> str:
        """One readable line: status, check, capability, path and detail."""
        detail = f": {self.detail}" if self.detail else ""
        return f"{self.status.upper():7} {self.check}{self.where()}{detail}"

    def where(self) -> str:
        """`` [capability at path]``, or empty when the check is about the whole module."""
        at = f"at {self.path}" if self.path else ""
        where = " ".join(p for p in (self.capability, at) if p)
        return f" [{where}]" if where else ""

    def sections(self) -> list[tuple[str, str]]:
        """What a report shows of this problem, in order, as ``(label, text)`` pairs:
        what happened, exit status, stderr tail, input, reproduce, rule and fix."""
        out = [("what happened", self.detail)] if self.detail else []
        status = exit_words(self.returncode)
        if status:
            out.append(("exit status", status))
        if self.stderr:
            out.append(("stderr tail", self.stderr))
        if self.reproduce:
            out += [("input", pretty_json(self.input)), ("reproduce", self.reproduce)]
        return [*out, ("rule", self.rule), ("fix", self.fix)]


def exit_words(returncode: int | None) -> str:
    """``1``, ``killed by signal SIGKILL (-9)``; empty for a clean exit or no process."""
    if not returncode:
        return ""
    if returncode > 0:
        return str(returncode)
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"killed by {name} ({returncode})"


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON (non-ASCII kept), cut after 2,000 characters."""
    text = printable_json(value, indent=2)
    if len(text) <= _INPUT_CHARS:
        return text
    return f"{text[:_INPUT_CHARS]}\n... ({len(text)} characters; the reproduction has all)"


def problem_text(result: CheckResult, width: int = 100) -> str:
    """A failed or warned check as indented text wrapped to ``width``: a headline, then
    each of :meth:`CheckResult.sections` (the reproduction kept on one line)."""
    lines = [f"{result.status.upper()} {result.check}{result.where()}"]
    for label, text in result.sections():
        if label in BLOCKS:
            lines.append(f"  {label}:")
            lines += [f"    {line}" for line in text.splitlines()]
        else:
            lines.append(textwrap.fill(text, max(width, 40), initial_indent=f"  {label}: ",
                                       subsequent_indent="    ", break_on_hyphens=False))
    return "\n".join(lines)


def output_width() -> int:
    """The terminal's width, between 60 and 120 columns (100 when unknown)."""
    return max(60, min(120, shutil.get_terminal_size((100, 24)).columns))


@dataclass
class CheckReport(Results[CheckResult]):
    """The outcome of :func:`murmur_nb.check_module`.

    Iterate it for :class:`CheckResult` rows (in the order the checks ran); :attr:`ok` is
    false when any check failed. In a notebook it shows as a test report: failures first,
    then warnings, skipped checks and the passes folded into one line that opens on click;
    ``str(report)`` is the same report as text.
    """

    module: str
    path: Path
    results: list[CheckResult] = field(default_factory=list)
    duration_s: float = 0.0
    examples: int = 0
    seed: int = 0
    #: Inputs sent per capability, by kind: boundary kinds (``maximum``, ``enum`` ...) and
    #: ``random``.
    inputs: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Inputs left out per capability when its time budget was spent, by kind
    #: (``boundary``, ``random``, ``refused``); capabilities with none are absent.
    left_out: dict[str, dict[str, int]] = field(default_factory=dict)
    #: Seconds each capability's calls could take (0: no limit).
    budget: float = 0.0

    def suite(self) -> str:
        """What the report checked, as its headline names it."""
        return "the modproto v1 checks"

    def headline(self) -> str:
        """``FAIL id (path): 3 fail, 1 warn, 0 skipped, 20 pass in 4.2 s (what was sent)``."""
        counts = ", ".join(f"{n} {s}" for s, n in self.counts().items())
        verdict = "PASS" if self.ok else "FAIL"
        return (f"{verdict} {self.module} ({self.path}): {counts} in {self.duration_s:.1f} s "
                f"({self.sent()})")  # fmt: skip

    def skipped_groups(self) -> list[tuple[str, list[str]]]:
        """The skipped checks as ``(reason, ["check [capability]", ...])``, one per reason."""
        groups: dict[str, list[str]] = {}
        for row in self.results:
            if row.status == "skipped":
                reason = f"{row.capability}: {row.detail}" if row.capability else row.detail
                groups.setdefault(reason, []).append(row.check)
        return list(groups.items())

    def summary(self, width: int | None = None) -> str:
        """The plain-text report wrapped to ``width`` (default: the terminal's): the
        headline, each failure and warning, skipped checks one line per reason, then one
        line for the passes."""
        width = width or output_width()
        blocks = [textwrap.fill(self.headline(), width, subsequent_indent="    ")]
        blocks += [problem_text(r, width) for r in self.ordered() if r.status in ("fail", "warn")]
        blocks += [
            textwrap.fill(f"SKIPPED {', '.join(checks)} [{reason}]", width,
                          subsequent_indent="    ")
            for reason, checks in self.skipped_groups()
        ]  # fmt: skip
        blocks.append(f"PASS {self.passes_line()}")
        return "\n\n".join(blocks)

    def sent(self) -> str:
        """What was sent: boundary and random inputs over all capabilities, and the seed."""
        boundary = sum(n for kinds in self.inputs.values() for k, n in kinds.items()
                       if k != "random")  # fmt: skip
        random = sum(kinds.get("random", 0) for kinds in self.inputs.values())
        caps = len(self.inputs)
        return (
            f"{boundary} boundary then {random} random inputs over {caps} "
            f"capabilit{'y' if caps == 1 else 'ies'}; {self.examples} random examples per "
            f"capability, seed {self.seed}{self.left_out_words()}"
        )

    def left_out_words(self) -> str:
        """``; 9 inputs left out ...`` naming the budget and each capability's count by
        kind, or empty when every input ran."""
        total = sum(n for kinds in self.left_out.values() for n in kinds.values())
        if not total:
            return ""
        each = "; ".join(
            f"{cap}: " + ", ".join(f"{n} {kind}" for kind, n in kinds.items() if n)
            for cap, kinds in self.left_out.items()
        )
        return (f"; {total} inputs left out, the {self.budget:g} s budget per capability "
                f"spent ({each})")  # fmt: skip

    def __str__(self) -> str:
        return self.summary()

    def to_records(self) -> list[dict[str, Any]]:
        """The rows as plain dicts, worst first (the ``--json`` output's ``checks``); a
        row's ``input`` is the JSON value it sent, ``None`` where it has no reproduction."""
        return [asdict(r) for r in self.ordered()]

    def to_json(self, indent: int | None = None) -> str:
        """Everything in the report as one JSON document (the ``--json`` output);
        :meth:`to_dict` is the same as Python data."""
        return printable_json(self.to_dict(), indent=indent)

    def to_dict(self) -> dict[str, Any]:
        """Everything in the report as JSON-ready data (:meth:`to_json` is its text)."""
        return {
            "module": self.module,
            "path": str(self.path),
            "ok": self.ok,
            "counts": self.counts(),
            "duration_s": round(self.duration_s, 3),
            "examples": self.examples,
            "seed": self.seed,
            "inputs": self.inputs,
            "budget_s": self.budget,
            "left_out": self.left_out,
            "checks": self.to_records(),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row per check, worst first; columns check, status, capability, path, detail,
        rule, fix, reproduce, stderr, input (a JSON value) and returncode."""
        import pandas as pd  # noqa: PLC0415 - pandas only when a frame is asked for

        columns = ["check", "status", "capability", "path", "detail", "rule", "fix",
                   "reproduce", "stderr", "input", "returncode"]  # fmt: skip
        frame = pd.DataFrame(self.to_records(), columns=columns)
        frame["status"] = pd.Categorical(frame["status"], categories=list(STATUSES))
        frame["returncode"] = frame["returncode"].astype("Int64")
        return frame

    def _repr_html_(self) -> str:
        return report_html(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.summary())
