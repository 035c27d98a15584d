"""Two replays side by side: joined on (record, event, window), differences named per row.

Wall time and fuel always differ between two runs, so they are shown but never make a row
"different"; what does is the outcome (``ok``, ``code``), the note, what compaction kept
(``kept_ids``, counts, characters, ``kept_ratio``) and whether the first system message and
the last user message survived. When either side failed only the outcome is compared: the
rest is missing on that side because of it, which is not a second difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from murmur_nb._render.core import esc
from murmur_nb._replay.chart import totals_chart

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COMPARED", "ReplayComparison", "compare_replays"]

KEYS = ["context_id", "event", "window"]
#: Columns whose difference makes two rows differ, in the order they are reported.
COMPARED = (
    "ok", "code", "note", "messages_out", "chars_out", "kept_ratio", "first_system_kept",
    "last_user_kept", "kept_ids",
)  # fmt: skip
SHOWN = (*COMPARED, "duration_ms", "fuel_used")
#: What is compared when either side failed.
OUTCOME = ("ok", "code")
#: How many rows the HTML view shows (the frame has them all).
HTML_ROWS = 40


def _one_hook(frame: pd.DataFrame, hook: str | None, which: str) -> tuple[str, pd.DataFrame]:
    """The rows of ``hook`` (the one hook of ``frame`` when ``None``). A replay of no row
    (of no record) is the empty side of a comparison of the hook named for it."""
    ids = list(dict.fromkeys(frame["hook_id"].dropna()))
    if hook is not None and frame.empty:
        return hook, frame
    if hook is None:
        if len(ids) != 1:
            raise ValueError(
                f"the {which} replay has hooks {ids}: name the one to compare, "
                "compare_replays(a, b, hooks=('old', 'new'))"
            )
        hook = ids[0]
    elif hook not in ids:
        raise ValueError(f"the {which} replay has no rows of hook {hook!r} (it has {ids})")
    return hook, frame[frame["hook_id"] == hook]


def _sides(results: pd.DataFrame, other: pd.DataFrame | None, hooks: Any
           ) -> tuple[tuple[str, pd.DataFrame], tuple[str, pd.DataFrame]]:  # fmt: skip
    for name, frame in (("results", results), ("other", other)):
        if frame is not None:
            _check_replay(name, frame)
    a, b = hooks if hooks is not None else (None, None)
    if other is not None:
        return _one_hook(results, a, "first"), _one_hook(other, b, "second")
    if hooks is None:
        ids = list(dict.fromkeys(results["hook_id"].dropna()))
        if len(ids) != 2:
            raise ValueError(
                f"this replay has hooks {ids}, not two: pass hooks=('old', 'new'), or two "
                "replays, compare_replays(old_run, new_run)"
            )
        a, b = ids
    return _one_hook(results, a, "first"), _one_hook(results, b, "second")


def _check_replay(name: str, frame: Any) -> None:
    """``frame`` must be what :func:`~murmur_nb.replay` returns (its columns compared)."""
    columns = getattr(frame, "columns", None)
    if columns is None:
        raise TypeError(f"compare_replays takes the DataFrames mnb.replay(...) returns; "
                        f"{name} is a {type(frame).__name__}")  # fmt: skip
    lacking = [c for c in (*KEYS, "hook_id", *SHOWN) if c not in columns]
    if lacking:
        raise ValueError(
            f"{name} is not a replay's frame: it lacks the column(s) {', '.join(lacking)}. "
            "Pass what mnb.replay(...) returns (filter its rows, but keep its columns)"
        )


def _keyed(frame: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd  # noqa: PLC0415 - pandas loads on first use

    out = frame[[*KEYS, *SHOWN]].copy()
    out["ok"] = out["ok"].astype("boolean")  # <NA>, not NaN, where the other side has no row
    out["window"] = out["window"].astype(object).where(out["window"].notna(), None)
    out["event"] = out["event"].astype(str)
    kept = [tuple(v) if isinstance(v, list) else None for v in out["kept_ids"]]
    out["kept_ids"] = pd.Series(kept, index=out.index, dtype=object)  # object when empty too
    return out


def _same(x: Any, y: Any) -> bool:
    missing_x = x is None or (not isinstance(x, tuple) and _isna(x))
    missing_y = y is None or (not isinstance(y, tuple) and _isna(y))
    if missing_x or missing_y:
        return missing_x and missing_y
    return bool(x == y)


def _isna(value: Any) -> bool:
    import pandas as pd  # noqa: PLC0415 - pandas loads on first use

    return bool(pd.isna(value))


@dataclass(frozen=True)
class ReplayComparison:
    """Two replays joined on (``context_id``, ``event``, ``window``).

    Attributes
    ----------
    left, right : str
        The two sides' labels (their hook ids; ``<id> (1)``/``<id> (2)`` when the same).
    frame : pandas.DataFrame
        One row per key: ``<column>_<side>`` for each compared column, ``duration_ms`` and
        ``fuel_used``, ``differs`` (the compared columns that differ, a list) and ``same``.
        A key only one side has is a difference (``"missing"``); the other side's columns
        are ``<NA>`` there (``ok_<side>`` is a nullable boolean).
    """

    left: str
    right: str
    frame: pd.DataFrame

    def to_pandas(self) -> pd.DataFrame:
        """The joined frame (a copy)."""
        return self.frame.copy()

    @property
    def differences(self) -> pd.DataFrame:
        """Only the rows that differ."""
        return self.frame[~self.frame["same"]]

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for names in self.frame["differs"]:
            for name in names:
                counts[name] = counts.get(name, 0) + 1
        what = ", ".join(f"{k} in {v}" for k, v in counts.items()) or "nothing"
        n, total = int((~self.frame["same"]).sum()), len(self.frame)
        return f"{self.left} vs {self.right}: {n} of {total} rows differ ({what})"

    def totals(self) -> dict[str, dict[str, int]]:
        """What each side did in all: ``calls`` and ``failed`` (of every row it has), then
        over its ``compact`` calls that returned, messages ``kept`` (offered ids it
        returned) and ``dropped`` (offered, not returned), ``chars_out``; and the
        ``fuel_used`` of all its calls. The chart the notebook view leads with."""
        return {side: _side_totals(self.frame, side) for side in (self.left, self.right)}

    def __repr__(self) -> str:
        return f"ReplayComparison({self.summary()})"

    def _repr_html_(self) -> str:
        return comparison_html(self)


#: The longest value a cell of the HTML view shows (the whole value is its tooltip).
CELL_CHARS = 40
#: A line may break after this many characters with no space, hyphen or ``_`` among them.
WORD_CHARS = 12
#: Cells break lines between words (and where :func:`_breakable` allows), not anywhere: a
#: table sized to fit squeezes ``overflow-wrap:anywhere`` columns to a letter or two.
_CELL = (
    "text-align:left;vertical-align:top;padding:2px 4px;overflow-wrap:break-word;"
    "border-bottom:1px solid var(--jp-border-color2, #8884)"
)
_MARK = "font-weight:bold;text-decoration:underline"
#: JupyterLab gives a table fixed, equal columns: ``auto`` lets the long values have room.
_TABLE = "width:100%;max-width:100%;table-layout:auto;border-collapse:collapse;margin:4px 0"


def _side_totals(frame: pd.DataFrame, side: str) -> dict[str, int]:
    out = {"calls": 0, "failed": 0, "kept": 0, "dropped": 0, "chars_out": 0, "fuel_used": 0}
    for _, row in frame.iterrows():
        ok = row[f"ok_{side}"]
        if _isna(ok):
            continue  # a key this side has no row for
        out["calls"] += 1
        fuel = row[f"fuel_used_{side}"]
        out["fuel_used"] += 0 if _isna(fuel) else int(fuel)
        if not bool(ok):
            out["failed"] += 1
            continue
        ids, chars = row[f"kept_ids_{side}"], row[f"chars_out_{side}"]
        if isinstance(ids, tuple) and not _isna(row["window"]):
            # each offered message whose id came back (a record may repeat an id)
            kept = min(len(ids), int(row["window"]))
            out["kept"] += kept
            out["dropped"] += int(row["window"]) - kept
        out["chars_out"] += 0 if _isna(chars) else int(chars)
    return out


def comparison_html(comparison: ReplayComparison) -> str:
    """The chart of :meth:`ReplayComparison.totals`, the summary, then one table row per hook
    for each differing key, with only the columns that differ in the rows shown.

    A frame of every column side by side (23 of them, most ``-``) is thousands of pixels wide;
    this view fits a notebook's output (no fixed width: no word is longer than
    :data:`WORD_CHARS`, a long value is cut to :data:`CELL_CHARS` with the whole of it in its
    tooltip). The frame keeps it all. In a narrow output (about 600 px) ten differing columns
    cannot all fit: the table then scrolls sideways in its own box (by less than the
    output's width), never the output or the page.
    """
    shown = comparison.differences.head(HTML_ROWS)
    columns = differing_columns(shown)
    head = "".join(f'<th style="{_CELL}">{_breakable(c)}</th>'
                   for c in ("record", "event", "window", "hook", *columns))  # fmt: skip
    body = "".join(_key_rows(comparison, row, columns) for _, row in shown.iterrows())
    more = len(comparison.differences) - len(shown)
    tail = f"<p>{more} more differing rows in .differences</p>" if more > 0 else ""
    table = (
        f'<div class="murmur-comparison-scroll" style="overflow-x:auto;max-width:100%">'
        f'<table style="{_TABLE}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
        "</div>" if len(shown) else ""
    )  # fmt: skip
    chart = totals_chart((comparison.left, comparison.right), comparison.totals())
    return (
        '<div class="murmur-comparison" style="max-width:100%;box-sizing:border-box;'
        f'overflow-wrap:anywhere">{chart}<p><b>{esc(comparison.summary())}</b></p>'
        + ("<p><small>Only the columns that differ, one line per hook; differing values in "
           "bold, underlined; a cut value shows whole on hover, every column is in "
           ".differences</small></p>" if len(shown) else "")
        + f"{table}{tail}</div>"
    )


def differing_columns(rows: pd.DataFrame) -> list[str]:
    """The compared columns that differ in any of ``rows``, in :data:`COMPARED` order (the
    outcome when the only difference is a key one side lacks)."""
    named = {name for names in rows["differs"] for name in names}
    columns = [c for c in COMPARED if c in named]
    return columns or list(OUTCOME)


def _key_rows(comparison: ReplayComparison, row: Any, columns: list[str]) -> str:
    differs = set(row["differs"])
    window = _cell(row["window"])
    keys = "".join(f'<td rowspan="2" style="{_CELL}">{_short(text)}</td>'
                   for text in (str(row["context_id"]), str(row["event"]), window))  # fmt: skip
    lines = []
    for side in (comparison.left, comparison.right):
        present = not _isna(row[f"ok_{side}"])
        label = _breakable(side) + ("" if present else " <small>(no row)</small>")
        cells = "".join(
            f'<td style="{_CELL}{";" + _MARK if present and differs & {c, "missing"} else ""}">'
            f"{_short(_cell(row[f'{c}_{side}']) if present else '')}</td>"
            for c in columns
        )
        lines.append(f'<td style="{_CELL}">{label}</td>{cells}')
    return (f'<tr class="murmur-comparison-row">{keys}{lines[0]}</tr>'
            f"<tr>{lines[1]}</tr>")  # fmt: skip


def _short(text: str) -> str:
    """``text`` as :func:`_breakable` HTML, cut to :data:`CELL_CHARS` with the whole of it as
    a tooltip."""
    if len(text) <= CELL_CHARS:
        return _breakable(text)
    return (f'<span title="{esc(text)}">{_breakable(text[: CELL_CHARS - 1])}'
            "\u2026</span>")  # fmt: skip


def _breakable(text: str) -> str:
    """``text`` escaped, a line allowed to break (``<wbr>``) after each ``_`` and within a run
    of :data:`WORD_CHARS` characters that has no space or hyphen to break at."""
    out, run = [], 0
    for char in text:
        out.append(esc(char))
        run = 0 if char.isspace() or char == "-" else run + 1
        if char == "_" or run >= WORD_CHARS:
            out.append("<wbr>")
            run = 0
    return "".join(out)


def _cell(value: Any) -> str:
    if isinstance(value, tuple):
        return ", ".join(map(str, value))
    if value is None or (not isinstance(value, list | dict) and _isna(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def compare_replays(
    results: pd.DataFrame,
    other: pd.DataFrame | None = None,
    *,
    hooks: tuple[str | None, str | None] | None = None,
) -> ReplayComparison:
    """Join two replays on (record, event, window) and name what differs in each row.

    Parameters
    ----------
    results : pandas.DataFrame
        A :func:`~murmur_nb.replay` frame: with two hooks (``replay(host, ..., hooks=[a, b])``),
        or one hook when ``other`` is given.
    other : pandas.DataFrame, optional
        A second replay (another host, another ``murmur.yaml``) of one hook.
    hooks : (str, str), optional
        Which hook of each side to compare, when a side has several, or has no row at all
        (a replay of no record): two such sides compare as an empty comparison.

    Returns
    -------
    ReplayComparison
        ``.frame`` (every key), ``.differences``, ``.summary()``; shown as an HTML table of
        the differing rows in a notebook.
    """
    import pandas as pd  # noqa: PLC0415 - pandas loads on first use

    (a, left), (b, right) = _sides(results, other, hooks)
    la, lb = (a, b) if a != b else (f"{a} (1)", f"{b} (2)")
    joined = pd.merge(_keyed(left), _keyed(right), on=KEYS, how="outer",
                      suffixes=(f"_{la}", f"_{lb}"), indicator=True)  # fmt: skip
    differs = []
    for _, row in joined.iterrows():
        if row["_merge"] != "both":
            differs.append(["missing"])
            continue
        both_ok = bool(row[f"ok_{la}"]) and bool(row[f"ok_{lb}"])
        names = COMPARED if both_ok else OUTCOME  # a failed call has nothing else to compare
        differs.append([c for c in names if not _same(row[f"{c}_{la}"], row[f"{c}_{lb}"])])
    joined["differs"] = pd.Series(differs, index=joined.index, dtype=object)
    joined["same"] = pd.Series([not d for d in differs], index=joined.index, dtype=bool)
    joined["event"] = pd.Categorical(joined["event"], ["task-start", "compact"])
    joined["window"] = joined["window"].astype("Int64")  # as a replay's (joined as objects)
    order = [*KEYS, *(f"{c}_{side}" for c in SHOWN for side in (la, lb)), "differs", "same"]
    joined = joined.sort_values(["context_id", "event"], kind="stable")[order]
    return ReplayComparison(la, lb, joined.reset_index(drop=True))
