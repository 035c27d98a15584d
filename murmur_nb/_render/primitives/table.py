"""Tables: CSV, TSV, Parquet and JSON records as a DataFrame, head and tail past a row budget.

Memory stays bounded by the budget, not the file, whatever the file claims:

- CSV/TSV are streamed in chunks (the head is kept, the tail is a rolling window, rows are
  counted), and only the first ``RenderBudget.parse_bytes`` of the file are parsed: past
  it the rows read are shown with a note, not the tail. The header line is read first, at
  most ``_HEADER_BYTES`` of it (a longer one is not a table anyone reads: the file is shown
  as text), and pandas builds only the first ``_COLUMNS`` columns: a 3.7 MiB header of
  400,000 columns took 784 MiB and 10 s of CPU as a DataFrame of 400,000 columns. The
  tokenizer still splits every field of a line it reads, about 8 bytes a field, so a
  parse budget of commas costs about eight times itself.
- Parquet row counts and sizes come from the footer. Only the row groups holding the head
  and tail rows are read, only their first ``_COLUMNS`` columns: the head in one batch of
  the rows kept, the tail by reading its row groups through. Before anything is decoded,
  what that may cost must fit ``parse_bytes``: the decoded size the column chunks declare
  (which bounds any one page), and for the tail at least 8 bytes a value, since a
  run-length encoded column of zeros declares almost nothing (a 341 KiB file whose one row
  group decodes to 610 MiB took 1.4 GiB when the whole row group was read, twice). Past it
  those rows are not shown, and a note says why and what to do.
- JSON records must be parsed whole and are limited by ``parse_bytes``.

Every cell and column name is cut to 200 characters (:func:`~..core.clipped`) before it is
escaped, so
the HTML of the rows shown stays small (an 8 MiB CSV of four rows made 8 MiB of HTML).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

from murmur_nb._render.core import (
    Body,
    CannotRender,
    RenderBudget,
    Source,
    clipped,
    esc,
    format_size,
    missing_dependency,
    readable,
)
from murmur_nb._render.primitives.text import load_json
from murmur_nb._render.theme import FG_MUTED

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Table", "load_table", "render_table"]

_CHUNK_ROWS = 50_000
#: columns shown of a wide table; the others are counted in the line above it
_COLUMNS = 50
#: longest CSV header line read for the column names
_HEADER_BYTES = 1024 * 1024
#: rows of a Parquet batch when the last rows are read (the row groups are read through)
_TAIL_BATCH = 65_536


@dataclass
class Table:
    """The rows of a table to show: ``head``, and ``tail`` when the head does not hold every
    row (indexed by true row numbers); ``rows`` and ``columns`` the file's counts, which are
    lower bounds when ``more_rows`` / ``more_columns``; ``notes`` say what was left out."""

    head: pd.DataFrame
    tail: pd.DataFrame | None
    rows: int
    columns: int
    more_rows: bool = False
    more_columns: bool = False
    notes: list[str] = field(default_factory=list)


class _Prefix(io.RawIOBase):
    """The first ``limit`` bytes of ``fh``; ``cut`` once more were asked for than it gave."""

    def __init__(self, fh: BinaryIO, limit: int) -> None:
        self._fh = fh
        self._left = limit
        self.cut = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        want = len(buffer)
        data = self._fh.read(min(want, self._left))
        if len(data) < want and self._left == len(data) and self._fh.read(1):
            self.cut = True
        self._left -= len(data)
        buffer[: len(data)] = data
        return len(data)


def _header_columns(fh: BinaryIO, sep: str, source: Source) -> int:
    """Columns named by the header line, read to at most ``_HEADER_BYTES``."""
    line = fh.readline(_HEADER_BYTES + 1)
    if len(line) > _HEADER_BYTES:
        raise CannotRender(
            f"its header line is longer than {format_size(_HEADER_BYTES)}, more columns than a "
            f"{source.media_type} table can show; it is shown as text: download the file to "
            "read it whole"
        )
    text = line.decode("utf-8", errors="replace")
    try:
        return len(next(csv.reader([text], delimiter=sep), []))
    except csv.Error:  # a field past csv's own size limit
        return text.count(sep) + 1


def _csv(source: Source, sep: str, budget: RenderBudget) -> Table:
    import pandas as pd  # noqa: PLC0415 - pandas only when a table is drawn

    keep = budget.table_rows
    head: pd.DataFrame | None = None
    tail: pd.DataFrame | None = None
    total = 0
    with source.file.open("rb") as fh:
        columns = _header_columns(fh, sep, source)
        fh.seek(0)
        stream = _Prefix(fh, budget.parse_bytes)
        usecols = list(range(_COLUMNS)) if columns > _COLUMNS else None
        try:
            reader = pd.read_csv(
                io.BufferedReader(stream), sep=sep, chunksize=_CHUNK_ROWS, usecols=usecols
            )
            with reader:
                for chunk in reader:
                    total += len(chunk)
                    if head is None or len(head) < keep:
                        head = chunk if head is None else pd.concat([head, chunk])
                        head = head.iloc[:keep]
                    tail = chunk if tail is None else pd.concat([tail, chunk]).iloc[-keep:]
                    tail = tail.iloc[-keep:]
        except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
            if not stream.cut or head is None:
                raise CannotRender(f"not a readable {source.media_type} table ({exc})") from exc
        if head is None:
            fh.seek(0)
            try:
                head = pd.read_csv(io.BufferedReader(_Prefix(fh, _HEADER_BYTES)), sep=sep, nrows=0)
            except (ValueError, pd.errors.EmptyDataError):
                head = pd.DataFrame()
    columns = columns if columns > _COLUMNS else len(head.columns)
    if not stream.cut:
        return Table(head, tail, total, columns)
    # the budget cut the last line read: it is not shown, and the rows past it are not known
    total = max(total - 1, 0)
    note = (
        f"only the first {format_size(budget.parse_bytes)} of this "
        f"{format_size(source.bytes)} file were read (RenderBudget.parse_bytes): its first "
        f"{min(total, keep)} rows are shown, not its last; render it with a larger "
        "RenderBudget(parse_bytes=...) to count and show them"
    )
    return Table(head.iloc[: min(total, keep)], None, total, columns, more_rows=True, notes=[note])


def _parquet_groups(sizes: list[int], keep: int, reverse: bool) -> list[int]:
    """Indexes of the row groups (with ``sizes`` rows) that hold the first (last) ``keep``."""
    order = range(len(sizes) - 1, -1, -1) if reverse else range(len(sizes))
    groups: list[int] = []
    got = 0
    for g in order:
        if got >= keep:
            break
        groups.append(g)
        got += sizes[g]
    return sorted(groups)


def _decoded_size(meta: Any, groups: list[int], names: list[str], every_row: bool) -> int:
    """What decoding the columns ``names`` of ``groups`` may cost, from the footer alone.

    Each column chunk declares its pages' decoded size, which bounds any one page; reading
    ``every_row`` (the tail: a row group is read from its start) also costs at least 8 bytes
    a value, whatever the pages declare (a run-length encoded column of zeros declares 78
    KiB for 20 million rows). A nested column counts its leaves; a name that prefixes
    another counts both: never less.
    """
    total = 0
    for g in groups:
        group = meta.row_group(g)
        declared = leaves = 0
        for c in range(group.num_columns):
            chunk = group.column(c)
            path = chunk.path_in_schema
            if any(path == n or path.startswith(n + ".") for n in names):
                declared += max(chunk.total_uncompressed_size, 0)
                leaves += 1
        total += max(declared, 8 * leaves * group.num_rows) if every_row else declared
    return total


def _parquet_rows(pf: Any, groups: list[int], names: list[str], keep: int, last: bool) -> Any:
    """The first (``last``: final) ``keep`` rows of ``groups``; the first in one batch of
    ``keep``, the last by reading the groups through in batches of ``_TAIL_BATCH`` rows."""
    import pyarrow as pa  # type: ignore[import-untyped]  # noqa: PLC0415 - optional, heavy

    batches: list[Any] = []
    got = 0
    size = max(keep, _TAIL_BATCH) if last else keep
    for batch in pf.iter_batches(batch_size=size, row_groups=groups, columns=names):
        batches.append(batch)
        got += batch.num_rows
        if last:
            while got - batches[0].num_rows >= keep:
                got -= batches.pop(0).num_rows
        elif got >= keep:
            break
    schema = pa.schema(list(pf.schema_arrow)[: len(names)])
    table = pa.Table.from_batches(batches, schema=schema)
    return table.slice(max(table.num_rows - keep, 0)) if last else table.slice(0, keep)


def _over(what: str, need: int, budget: RenderBudget) -> str:
    return (
        f"{what} shown: reading them decodes up to {format_size(need)} of the row groups "
        f"holding them, over the {format_size(budget.parse_bytes)} parse budget "
        "(RenderBudget.parse_bytes); render it with a larger RenderBudget(parse_bytes=...), "
        "or write the file with smaller row groups"
    )


def _parquet(source: Source, budget: RenderBudget) -> Table:
    try:
        import pandas as pd  # noqa: PLC0415 - pandas only when a table is drawn
        import pyarrow as pa  # noqa: PLC0415 - optional, heavy (typed as Any: see _parquet_rows)
        import pyarrow.parquet as pq  # type: ignore[import-untyped]  # noqa: PLC0415
    except ImportError as exc:
        raise missing_dependency("pyarrow", "Parquet tables") from exc
    keep = budget.table_rows
    try:
        pf = pq.ParquetFile(source.file)
    except (pa.ArrowException, OSError) as exc:
        raise CannotRender(f"not a readable Parquet file ({exc})") from exc
    with pf:
        meta = pf.metadata
        total = meta.num_rows
        every = pf.schema_arrow.names
        names = every[:_COLUMNS]
        sizes = [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
        head_groups = _parquet_groups(sizes, keep, reverse=False)
        tail_groups = _parquet_groups(sizes, keep, reverse=True) if total > keep else []
        empty = pa.schema(list(pf.schema_arrow)[:_COLUMNS]).empty_table().to_pandas()
        table = Table(empty, None, total, len(every))
        head_need = _decoded_size(meta, head_groups, names, every_row=False)
        tail_need = _decoded_size(meta, tail_groups, names, every_row=True)
        try:
            if head_need > budget.parse_bytes:
                table.notes.append(_over("no rows are", head_need, budget))
                return table
            table.head = _parquet_rows(pf, head_groups, names, keep, last=False).to_pandas()
            if tail_need > budget.parse_bytes:
                table.notes.append(_over("the last rows are not", tail_need, budget))
            elif tail_groups:
                tail = _parquet_rows(pf, tail_groups, names, keep, last=True).to_pandas()
                tail.index = pd.RangeIndex(total - len(tail), total)
                table.tail = tail
        except (pa.ArrowException, OSError) as exc:
            raise CannotRender(f"not a readable Parquet file ({exc})") from exc
    return table


def _records(source: Source, budget: RenderBudget) -> Table:
    import pandas as pd  # noqa: PLC0415

    value: Any = load_json(source, budget)
    if isinstance(value, dict) and isinstance(value.get("records"), list):
        value = value["records"]
    if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
        raise CannotRender("JSON is not a list of records (objects)")
    # a lone surrogate ("\\ud800" is valid JSON) cannot become a string column: its escape can
    frame = pd.DataFrame.from_records([_readable_record(r) for r in value])
    keep = budget.table_rows
    return Table(frame.iloc[:keep], frame.iloc[-keep:], len(frame), len(frame.columns))


def _readable_record(record: dict[str, Any]) -> dict[str, Any]:
    return {readable(str(k)): readable(v) if isinstance(v, str) else v for k, v in record.items()}


def load_table(source: Source, budget: RenderBudget) -> Table:
    """The rows to show: ``head`` holds every row when they fit ``table_rows`` (``tail`` is
    then ``None``), else the first half of the budget and ``tail`` the last half, indexed by
    true row numbers; at most ``_COLUMNS`` columns of either.
    """
    import pandas as pd  # noqa: PLC0415

    keep = budget.table_rows
    mt = source.media_type
    if mt in ("text/csv", "text/tab-separated-values"):
        table = _csv(source, "\t" if mt.endswith("values") else ",", budget)
    elif mt == "application/vnd.apache.parquet":
        table = _parquet(source, budget)
    else:
        table = _records(source, budget)
    table.head = table.head.iloc[:, :_COLUMNS]
    table.more_columns = table.more_columns or table.columns > _COLUMNS
    if table.more_rows or table.rows <= keep or table.tail is None:
        table.head, table.tail = table.head.iloc[:keep], None
        return table
    half_tail = keep // 2
    tail = table.tail.iloc[:, :_COLUMNS]
    tail = tail.iloc[len(tail) - half_tail :] if half_tail else tail.iloc[:0]
    if mt != "application/vnd.apache.parquet":
        tail.index = pd.RangeIndex(table.rows - len(tail), table.rows)
    table.head, table.tail = table.head.iloc[: (keep + 1) // 2], tail
    return table


def _cut(value: Any) -> Any:
    return clipped(value) if isinstance(value, str) else value


def _shown(table: Table) -> tuple[pd.DataFrame, str]:
    """The frame to draw, cells and names :func:`~..core.clipped`, and what it shows."""
    import pandas as pd  # noqa: PLC0415

    head = table.head
    if table.tail is None:
        frame = head
        if table.more_rows:
            shown = f"first {len(head)} of at least {table.rows:,} rows"
        else:
            shown = f"all {table.rows} rows" if len(head) == table.rows else (
                f"first {len(head)} of {table.rows:,} rows" if len(head) else "no rows"
            )
    else:
        gap = pd.DataFrame([["…"] * len(head.columns)], columns=head.columns, index=["…"])
        frame = pd.concat([head.astype(object), gap, table.tail.astype(object)])
        shown = f"first {len(head)} and last {len(table.tail)} of {table.rows:,} rows"
    if table.more_columns:
        shown += f", first {len(head.columns)} columns"
    frame = frame.map(_cut)
    frame.columns = [clipped(str(c)) for c in frame.columns]
    return frame, shown


def render_table(source: Source, budget: RenderBudget) -> Body:
    table = load_table(source, budget)
    frame, shown = _shown(table)
    html_table = frame.to_html(border=0, escape=True, na_rep="", max_cols=_COLUMNS)
    more = "+" if table.more_rows else ""
    html = (
        f'<div style="font-size:12px;color:{FG_MUTED}">{table.rows:,}{more} rows x '
        f"{table.columns} columns; {esc(shown)}</div>"
        # every row the line above names is on the page: no inner vertical scroll box (the
        # preview holds at most head + tail rows); only a wide table scrolls sideways
        f'<div style="overflow-x:auto;font-size:12px">{html_table}</div>'
    )
    details = [f"{table.rows}{more} rows x {table.columns} columns; {shown}"]
    return Body(html=html, details=details, notes=table.notes)
