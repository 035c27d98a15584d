"""Tables: CSV, TSV, Parquet and JSON records as a DataFrame, head and tail past a row budget.

Memory stays bounded by the row budget, not the file: CSV/TSV are streamed in chunks (the
head is kept, the tail is a rolling window, rows are counted); Parquet row counts come from
the footer and only the first and last row groups needed are read. JSON records must be
parsed whole and are limited by ``RenderBudget.parse_bytes``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from murmur_nb._render.core import (
    Body,
    CannotRender,
    RenderBudget,
    Source,
    esc,
    missing_dependency,
    readable,
)
from murmur_nb._render.primitives.text import load_json
from murmur_nb._render.theme import FG_MUTED

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["load_table", "render_table"]

_CHUNK_ROWS = 50_000


def _csv(source: Source, sep: str, keep: int) -> tuple[pd.DataFrame, pd.DataFrame | None, int]:
    import pandas as pd  # noqa: PLC0415 - pandas only when a table is drawn

    head: pd.DataFrame | None = None
    tail: pd.DataFrame | None = None
    total = 0
    try:
        reader = pd.read_csv(source.file, sep=sep, chunksize=_CHUNK_ROWS)
        with reader:
            for chunk in reader:
                total += len(chunk)
                if head is None or len(head) < keep:
                    head = chunk if head is None else pd.concat([head, chunk])
                    head = head.iloc[:keep]
                tail = chunk if tail is None else pd.concat([tail, chunk]).iloc[-keep:]
                tail = tail.iloc[-keep:]
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
        raise CannotRender(f"not a readable {source.media_type} table ({exc})") from exc
    if head is None:
        try:
            head = pd.read_csv(source.file, sep=sep, nrows=0)
        except (ValueError, pd.errors.EmptyDataError):
            head = pd.DataFrame()
    return head, tail, total


def _parquet(source: Source, keep: int) -> tuple[pd.DataFrame, pd.DataFrame | None, int]:
    try:
        import pandas as pd  # noqa: PLC0415 - pandas only when a table is drawn
        import pyarrow as pa  # type: ignore[import-untyped]  # noqa: PLC0415 - optional, heavy
        import pyarrow.parquet as pq  # type: ignore[import-untyped]  # noqa: PLC0415
    except ImportError as exc:
        raise missing_dependency("pyarrow", "Parquet tables") from exc
    try:
        pf = pq.ParquetFile(source.file)
    except (pa.ArrowException, OSError) as exc:
        raise CannotRender(f"not a readable Parquet file ({exc})") from exc
    with pf:
        total = pf.metadata.num_rows
        groups = pf.metadata.num_row_groups
        head_tables: list[Any] = []
        got = 0
        for g in range(groups):
            if got >= keep:
                break
            t = pf.read_row_group(g)
            head_tables.append(t)
            got += t.num_rows
        tail_tables: list[Any] = []
        got = 0
        for g in reversed(range(groups)):
            if got >= keep:
                break
            t = pf.read_row_group(g)
            tail_tables.insert(0, t)
            got += t.num_rows
        schema = pf.schema_arrow
        head = pa.concat_tables(head_tables).slice(0, keep) if head_tables else schema.empty_table()
        tail_t = pa.concat_tables(tail_tables) if tail_tables else schema.empty_table()
        tail_t = tail_t.slice(max(tail_t.num_rows - keep, 0))
    head_df = head.to_pandas()
    tail_df = tail_t.to_pandas()
    tail_df.index = pd.RangeIndex(total - len(tail_df), total)
    return head_df, tail_df, total


def _records(source: Source, budget: RenderBudget) -> pd.DataFrame:
    import pandas as pd  # noqa: PLC0415

    value: Any = load_json(source, budget)
    if isinstance(value, dict) and isinstance(value.get("records"), list):
        value = value["records"]
    if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
        raise CannotRender("JSON is not a list of records (objects)")
    # a lone surrogate ("\\ud800" is valid JSON) cannot become a string column: its escape can
    return pd.DataFrame.from_records([_readable_record(r) for r in value])


def _readable_record(record: dict[str, Any]) -> dict[str, Any]:
    return {readable(str(k)): readable(v) if isinstance(v, str) else v for k, v in record.items()}


def load_table(
    source: Source, budget: RenderBudget
) -> tuple[pd.DataFrame, pd.DataFrame | None, int]:
    """``(head, tail, total_rows)``; ``tail`` is ``None`` when the head already holds every row.

    ``head`` holds at most ``table_rows`` rows when the table fits, else the first half of
    the budget; ``tail`` the last half, indexed by true row numbers.
    """
    import pandas as pd  # noqa: PLC0415

    keep = budget.table_rows
    mt = source.media_type
    if mt in ("text/csv", "text/tab-separated-values"):
        head, tail, total = _csv(source, "\t" if mt.endswith("values") else ",", keep)
    elif mt == "application/vnd.apache.parquet":
        head, tail, total = _parquet(source, keep)
    else:
        frame = _records(source, budget)
        total = len(frame)
        head, tail = frame.iloc[:keep], frame.iloc[-keep:]
    if total <= keep:
        return head.iloc[:keep], None, total
    half_head = (keep + 1) // 2
    half_tail = keep // 2
    assert tail is not None
    tail = tail.iloc[len(tail) - half_tail :] if half_tail else tail.iloc[:0]
    if mt != "application/vnd.apache.parquet":
        tail.index = pd.RangeIndex(total - len(tail), total)
    return head.iloc[:half_head], tail, total


def render_table(source: Source, budget: RenderBudget) -> Body:
    import pandas as pd  # noqa: PLC0415

    head, tail, total = load_table(source, budget)
    columns = len(head.columns)
    if tail is None:
        frame = head
        shown = f"all {total} rows"
    else:
        gap = pd.DataFrame([["…"] * columns], columns=head.columns, index=["…"])
        frame = pd.concat([head.astype(object), gap, tail.astype(object)])
        shown = f"first {len(head)} and last {len(tail)} of {total:,} rows"
    table = frame.to_html(border=0, escape=True, na_rep="", max_cols=50)
    html = (
        f'<div style="font-size:12px;color:{FG_MUTED}">{total:,} rows x {columns} columns; '
        f"{esc(shown)}</div>"
        # every row the line above names is on the page: no inner vertical scroll box (the
        # preview holds at most head + tail rows); only a wide table scrolls sideways
        f'<div style="overflow-x:auto;font-size:12px">{table}</div>'
    )
    return Body(html=html, details=[f"{total} rows x {columns} columns; {shown}"])
