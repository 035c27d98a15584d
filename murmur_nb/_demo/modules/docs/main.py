"""Demo module ``docs``: one report in every document shape a notebook shows.

``docs.report`` makes a small synthetic order dataset (seeded, so deterministic) and writes it
as a CSV table, a Parquet table (when pyarrow is importable; otherwise a warning says how to
get it), a multi-page PDF report (Pillow's PDF writer, fixed dates), a Markdown summary, a
plain-text totals sheet, a JSON summary and a zip bundle of them all (fixed timestamps).
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import random
import sys
import time
import zipfile
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from murmur_nb._demo.modules import _kit as kit
else:  # the installed module folder carries its own copy of the kit
    import _kit as kit

from PIL import Image, ImageDraw, ImageFont

MODULE = "docs"
REGIONS = ("north", "south", "east", "west")
_PAGE = (842, 595)  # A4 landscape at 72 dpi
_EPOCH = time.gmtime(1767225600)  # 2026-01-01T00:00:00Z: fixed PDF dates keep bytes stable
_ZIP_TIME = (2026, 1, 1, 0, 0, 0)


def _media(media_type: str) -> dict[str, Any]:
    return {"$schema": kit.SCHEMA_DIALECT, "contentMediaType": media_type}


DESCRIPTOR: dict[str, Any] = {
    "module": MODULE,
    "name": "Docs",
    "version": "1.0.0",
    "protocol_versions": [kit.PROTOCOL_ID],
    "capabilities": [
        kit.capability(
            "docs.report",
            "Orders report",
            "Write an orders report as PDF, CSV, Parquet, Markdown, text, JSON and a zip.",
            artifacts=[
                "docs.pdf",
                "docs.csv",
                "docs.parquet",
                "docs.markdown",
                "docs.text",
                "docs.summary",
                "docs.bundle",
            ],
        )
    ],
    "request_schemas": {
        "docs.report.request": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {
                "title": {"type": "string", "maxLength": 60, "default": "Orders by region"},
                "days": {
                    "type": "integer",
                    "minimum": 7,
                    "maximum": 366,
                    "default": 28,
                    "description": "How many days of orders to simulate.",
                },
                "seed": {"type": "integer", "minimum": 0, "default": 11},
            },
            "additionalProperties": False,
        }
    },
    "result_schemas": {
        "docs.report.result": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {
                "rows": {"type": "integer"},
                "pages": {"type": "integer"},
                "total_revenue": {"type": "number"},
                "parquet": {"type": "boolean"},
            },
            "required": ["rows", "pages", "total_revenue", "parquet"],
        }
    },
    "artifact_schemas": {
        "docs.pdf": _media("application/pdf"),
        "docs.csv": _media("text/csv"),
        "docs.parquet": _media("application/vnd.apache.parquet"),
        "docs.markdown": _media("text/markdown"),
        "docs.text": _media("text/plain"),
        "docs.summary": {
            "$schema": kit.SCHEMA_DIALECT,
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "regions": {"type": "object", "additionalProperties": {"type": "object"}},
            },
        },
        "docs.bundle": _media("application/zip"),
    },
    "agent_overlays": [],
    "skills": [],
    "permissions": {
        "filesystem_read": [],
        "filesystem_write": ["out"],
        "network": [],
        "credentials": [],
        "paid_providers": [],
        "publish": False,
        "subprocess": [],
    },
    "requirements": [],
}

Row = tuple[str, str, int, float]


def _dataset(days: int, seed: int) -> list[Row]:
    rng = random.Random(seed)
    start = date(2026, 1, 1)
    rows: list[Row] = []
    for d in range(days):
        day = (start + timedelta(days=d)).isoformat()
        weekend = (start + timedelta(days=d)).weekday() >= 5
        for base, region in zip((120, 90, 150, 70), REGIONS, strict=True):
            orders = max(0, int(rng.gauss(base * (0.6 if weekend else 1.0), base * 0.15)))
            revenue = round(orders * rng.uniform(18.0, 26.0), 2)
            rows.append((day, region, orders, revenue))
    return rows


def _totals(rows: list[Row]) -> dict[str, dict[str, float]]:
    totals: dict[str, dict[str, float]] = {r: {"orders": 0, "revenue": 0.0} for r in REGIONS}
    for _, region, orders, revenue in rows:
        totals[region]["orders"] += orders
        totals[region]["revenue"] = round(totals[region]["revenue"] + revenue, 2)
    return totals


def _font(size: int) -> Any:
    return ImageFont.load_default(size=size)


def _pages(title: str, rows: list[Row], totals: dict[str, dict[str, float]]) -> list[Image.Image]:
    pages: list[Image.Image] = []
    cover = Image.new("RGB", _PAGE, "white")
    draw = ImageDraw.Draw(cover)
    draw.rectangle([0, 0, _PAGE[0], 120], fill=(36, 56, 120))
    draw.text((48, 40), title, font=_font(40), fill="white")
    draw.text((48, 160), f"{len(rows)} rows, {rows[0][0]} to {rows[-1][0]}", font=_font(22),
              fill="black")
    grand = sum(t["revenue"] for t in totals.values())
    draw.text((48, 200), f"Total revenue: {grand:,.2f}", font=_font(22), fill="black")
    for i, region in enumerate(REGIONS):
        draw.text((48, 260 + 34 * i),
                  f"{region:<6}  {int(totals[region]['orders']):>7,} orders   "
                  f"{totals[region]['revenue']:>12,.2f}", font=_font(20), fill=(40, 40, 40))
    pages.append(cover)

    chart = Image.new("RGB", _PAGE, "white")
    draw = ImageDraw.Draw(chart)
    draw.text((48, 32), "Revenue by region", font=_font(30), fill="black")
    peak = max(t["revenue"] for t in totals.values()) or 1.0
    colours = [(70, 110, 200), (220, 120, 60), (80, 170, 110), (170, 80, 160)]
    for i, region in enumerate(REGIONS):
        x = 120 + i * 170
        h = int(380 * totals[region]["revenue"] / peak)
        draw.rectangle([x, 520 - h, x + 110, 520], fill=colours[i])
        draw.text((x + 10, 530), region, font=_font(18), fill="black")
        draw.text((x, 500 - h), f"{totals[region]['revenue']:,.0f}", font=_font(16),
                  fill="black")
    draw.line([100, 520, 800, 520], fill="black", width=2)
    pages.append(chart)

    per_page = 24
    for first in range(0, min(len(rows), per_page * 3), per_page):
        page = Image.new("RGB", _PAGE, "white")
        draw = ImageDraw.Draw(page)
        draw.text((48, 24), f"Daily orders (rows {first + 1}-{min(first + per_page, len(rows))})",
                  font=_font(22), fill="black")
        for j, (day, region, orders, revenue) in enumerate(rows[first : first + per_page]):
            y = 70 + 20 * j
            if j % 2:
                draw.rectangle([40, y - 2, 800, y + 17], fill=(238, 240, 246))
            draw.text((48, y), f"{day}   {region:<6} {orders:>6} {revenue:>12,.2f}",
                      font=_font(15), fill="black")
        pages.append(page)
    return pages


def _pdf(pages: list[Image.Image], title: str) -> bytes:
    buf = io.BytesIO()
    pages[0].save(
        buf,
        format="PDF",
        save_all=True,
        append_images=pages[1:],
        resolution=72.0,
        title=title,
        producer="murmur-nb demo module docs",
        creationDate=_EPOCH,
        modDate=_EPOCH,
    )
    return buf.getvalue()


def _parquet(rows: list[Row]) -> bytes | None:
    try:  # optional (murmur-nb[render]); without it the report says so in a warning
        pa: Any = importlib.import_module("pyarrow")
        pq: Any = importlib.import_module("pyarrow.parquet")
    except ImportError:
        return None
    table = pa.table(
        {
            "day": [r[0] for r in rows],
            "region": [r[1] for r in rows],
            "orders": pa.array([r[2] for r in rows], type=pa.int64()),
            "revenue": pa.array([r[3] for r in rows], type=pa.float64()),
        }
    )
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def report(ctx: kit.Context) -> kit.Outcome:
    title = str(ctx.input.get("title", "Orders by region"))
    days = int(ctx.input.get("days", 28))
    seed = int(ctx.input.get("seed", 11))
    rows = _dataset(days, seed)
    totals = _totals(rows)
    grand = round(sum(t["revenue"] for t in totals.values()), 2)
    csv_bytes = _csv(rows)
    md_bytes = _markdown(title, days, rows, totals, grand)
    txt_bytes = _sheet(title, totals, grand)
    summary = {"title": title, "days": days, "seed": seed, "rows": len(rows),
               "total_revenue": grand, "regions": totals}
    json_bytes = (json.dumps(summary, indent=2) + "\n").encode()
    pages = _pages(title, rows, totals)
    pdf_bytes = _pdf(pages, title)
    parquet_bytes = _parquet(rows)

    ctx.write("report/report.pdf", pdf_bytes, kind="docs.pdf", media_type="application/pdf",
              presentation="document", title=f"{title} ({len(pages)} pages)")
    ctx.write("report/orders.csv", csv_bytes, kind="docs.csv", media_type="text/csv",
              presentation="table", title="Daily orders (CSV)", artifact_id="orders-csv")
    if parquet_bytes is not None:
        ctx.write("report/orders.parquet", parquet_bytes, kind="docs.parquet",
                  media_type="application/vnd.apache.parquet", presentation="table",
                  title="Daily orders (Parquet)", artifact_id="orders-parquet")
    else:
        ctx.warnings.append(
            "pyarrow is not installed, so the Parquet table was skipped; "
            "install it with `pip install 'murmur-nb[render]'` "
            "(in a murmur-nb checkout: `pip install -e '.[render]'`)"
        )
    ctx.write("report/summary.md", md_bytes, kind="docs.markdown", media_type="text/markdown",
              presentation="markdown", title="Summary")
    ctx.write("report/totals.txt", txt_bytes, kind="docs.text", media_type="text/plain",
              presentation="text", title="Totals sheet")
    ctx.write("report/summary.json", json_bytes, kind="docs.summary",
              media_type="application/json", presentation="json", title="Summary (JSON)",
              artifact_id="summary-json")
    bundle = _bundle((("report.pdf", pdf_bytes), ("orders.csv", csv_bytes),
                      ("summary.md", md_bytes), ("totals.txt", txt_bytes),
                      ("summary.json", json_bytes)))
    ctx.write("report/report-bundle.zip", bundle, kind="docs.bundle",
              media_type="application/zip", presentation="download",
              title="Everything as one zip")
    return kit.Outcome(
        {"rows": len(rows), "pages": len(pages), "total_revenue": grand,
         "parquet": parquet_bytes is not None},
        estimated_cost=0.0,
        actual_cost=0.0,
    )


def _csv(rows: list[Row]) -> bytes:
    text_csv = io.StringIO()
    writer = csv.writer(text_csv, lineterminator="\n")
    writer.writerow(["day", "region", "orders", "revenue"])
    writer.writerows(rows)
    return text_csv.getvalue().encode()


def _markdown(title: str, days: int, rows: list[Row],
              totals: dict[str, dict[str, float]], grand: float) -> bytes:
    md = [f"# {title}\n", f"{len(rows)} rows over {days} days; total revenue **{grand:,.2f}**.\n",
          "| region | orders | revenue |", "| --- | ---: | ---: |"]
    md += [f"| {r} | {int(totals[r]['orders']):,} | {totals[r]['revenue']:,.2f} |"
           for r in REGIONS]
    best = max(REGIONS, key=lambda r: totals[r]["revenue"])
    md.append(f"\nThe strongest region is **{best}**. Weekends run at about 60% of weekdays.\n")
    return "\n".join(md).encode()


def _sheet(title: str, totals: dict[str, dict[str, float]], grand: float) -> bytes:
    sheet = [f"{title}", "=" * len(title), f"{'region':<8}{'orders':>10}{'revenue':>14}"]
    sheet += [f"{r:<8}{int(totals[r]['orders']):>10}{totals[r]['revenue']:>14.2f}"
              for r in REGIONS]
    sheet.append(f"{'total':<8}{sum(int(t['orders']) for t in totals.values()):>10}{grand:>14.2f}")
    return ("\n".join(sheet) + "\n").encode()


def _bundle(files: tuple[tuple[str, bytes], ...]) -> bytes:
    """One zip of ``files``, with fixed times and modes so the same report gives the same bytes."""
    bundle = io.BytesIO()
    with zipfile.ZipFile(bundle, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, data)
    return bundle.getvalue()


HANDLERS: dict[str, kit.Handler] = {"docs.report": report}


def main(argv: list[str]) -> int:
    return kit.run(DESCRIPTOR, HANDLERS, argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
