"""Benchmark: loading a conversation record into pandas through the paginated read API.

Writes a record of N messages (about 260 bytes a line, one in three a tool result) and
one of 2N with the package's own RecordWriter into a temporary folder, then times,
side by side in one run:

  (a) orjson over each line + pd.DataFrame      (the direct way, no pagination)
  (b) pd.read_json(lines=True)
  (c) mnb.read_conversation, walking read-messages pages of 100 until no cursor,
      from a fresh store (so the per-record index is built inside the timing)

and reports c/a (goal <= 1.2), the 2N walk over the N walk (goal <= 2.2), and the
median of one warm read_messages(limit=100) deep in the record (goal <= 0.5 ms).
(a), (c) and (c, 2N) run interleaved in --repeat rounds (default 5). The machine may be
shared, so the ratios are paired: c/a and 2N/N are computed within each round, from runs
seconds apart, and the median round is reported (seconds: medians too; every round is
printed).

Usage: python benchmarks/bench_conversations.py [--messages N] [--repeat R] [--dir PATH]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

import murmur_nb as mnb

_WORDS = [
    "the",
    "a",
    "model",
    "tool",
    "result",
    "context",
    "page",
    "cursor",
    "record",
    "message",
    "append",
    "index",
    "offset",
    "snapshot",
    "reader",
    "writer",
    "runtime",
    "hook",
    "guest",
    "host",
    "pandas",
    "frame",
    "column",
    "parse",
    "line",
    "json",
    "walk",
    "total",
    "limit",
    "newest",
    "oldest",
    "envelope",
    "body",
    "call",
    "error",
    "note",
    "summary",
    "compact",
]


def _sentences(count: int) -> list[str]:
    out = []
    for k in range(count):
        length = 12 + (k * 37) % 28
        out.append(" ".join(_WORDS[(k * 7 + j * 13) % len(_WORDS)] for j in range(length)))
    return out


def write_record(home: Path, context_id: str, count: int) -> Path:
    """Write ``count`` messages as the runtime would; one in three is a tool result."""
    sentences = _sentences(997)
    with mnb.RecordWriter(home, context_id, buffered=True, stamp=False) as writer:
        for i in range(count):
            day, hour, minute = 1 + (i // 86400) % 28, (i // 3600) % 24, (i // 60) % 60
            stamp = f"2026-03-{day:02d}T{hour:02d}:{minute:02d}:{i % 60:02d}.{i % 1000:03d}Z"
            text = sentences[(i * 7919) % 997]
            kind = i % 3
            if kind == 2:
                writer.append(
                    "tool",
                    {"stdout": text[: 40 + i % 80], "exit_code": i % 5 == 0, "lines": i % 17},
                    id=f"msg_{i:012x}",
                    created_at=stamp,
                    tool_call_id=f"call_{i:010x}",
                    is_error=i % 11 == 0,
                )
            elif kind == 1:
                writer.append(
                    "assistant", text, id=f"msg_{i:012x}", name="planner", created_at=stamp
                )
            else:
                writer.append("user", text, id=f"msg_{i:012x}", created_at=stamp)
        return writer.path


def timed(run: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall seconds, CPU seconds and result of one run, after a full collection."""
    gc.collect()
    started, cpu = time.perf_counter(), time.process_time()
    result = run()
    return time.perf_counter() - started, time.process_time() - cpu, result


def direct(path: Path) -> pd.DataFrame:
    with path.open("rb") as handle:
        rows = [orjson.loads(line) for line in handle]
    return pd.DataFrame(rows)


def page_latency(home: Path, context_id: str, count: int, calls: int) -> list[float]:
    """Latencies (s) of one warm read_messages(cursor, 100) at the middle of the record."""
    reader = mnb.ConversationStore(home).reader(context_id)
    page = reader.read_messages(None, 100)
    cursor = page.next_cursor
    for _ in range(max(0, count // 2 // 100 - 1)):
        assert cursor is not None
        cursor = reader.read_messages(cursor, 100).next_cursor
    assert cursor is not None
    for _ in range(20):
        reader.read_messages(cursor, 100)
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        page = reader.read_messages(cursor, 100)
        samples.append(time.perf_counter() - started)
    assert len(page.messages) == 100
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--calls", type=int, default=1000, help="page reads for the p50")
    parser.add_argument("--dir", type=Path, default=None, help="work folder (default: temp)")
    args = parser.parse_args(argv)
    n = args.messages

    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench-conv-") as tmp:
        home = Path(tmp)
        started = time.perf_counter()
        path_n = write_record(home, "bench-n", n)
        path_2n = write_record(home, "bench-2n", 2 * n)
        size_n = path_n.stat().st_size
        print(
            f"records: N={n:,} ({size_n / 1e6:.0f} MB), 2N={2 * n:,} "
            f"({path_2n.stat().st_size / 1e6:.0f} MB), written in "
            f"{time.perf_counter() - started:.1f} s with mnb.RecordWriter"
        )
        for path in (path_n, path_2n):  # same page-cache state for every contender
            path.read_bytes()

        # (b) once; then (a), (c) and (c, 2N) interleaved, --repeat rounds, so
        # that a change in machine load during the run hits every contender alike.
        t_b, cpu_b, frame_b = timed(lambda: pd.read_json(path_n, lines=True))
        assert len(frame_b) == n
        ids_b = frame_b["id"].tolist()
        del frame_b
        runs: dict[str, list[tuple[float, float]]] = {"a": [], "c": [], "c2": []}
        tools = 0
        for _ in range(args.repeat):
            wall, cpu, frame = timed(lambda: direct(path_n))
            runs["a"].append((wall, cpu))
            assert frame["id"].tolist() == ids_b
            del frame
            wall, cpu, frame = timed(lambda: mnb.read_conversation("bench-n", home, progress=False))
            runs["c"].append((wall, cpu))
            assert frame["id"].tolist() == ids_b, "read_conversation disagrees with the file"
            tools = int((frame["role"] == "tool").sum())
            del frame
            wall, cpu, frame = timed(
                lambda: mnb.read_conversation("bench-2n", home, progress=False)
            )
            runs["c2"].append((wall, cpu))
            assert len(frame) == 2 * n
            del frame
        del ids_b
        gc.collect()
        samples = page_latency(home, "bench-n", n, args.calls)

    median = statistics.median
    t_a, t_c, t_c2 = (median([w for w, _ in runs[k]]) for k in ("a", "c", "c2"))
    cpu_a, cpu_c, cpu_c2 = (median([c for _, c in runs[k]]) for k in ("a", "c", "c2"))
    walk_ratios = [c[0] / a[0] for a, c in zip(runs["a"], runs["c"], strict=True)]
    scale_ratios = [c2[0] / c[0] for c, c2 in zip(runs["c"], runs["c2"], strict=True)]
    walk_ratio = median(walk_ratios)
    scale_ratio = median(scale_ratios)
    p50_ms = statistics.median(samples) * 1e3
    p99_ms = statistics.quantiles(samples, n=100)[98] * 1e3
    print(f"python {sys.version.split()[0]}, pandas {pd.__version__}, orjson {orjson.__version__}")
    print(f"(b) once; (a), (c) and (c, 2N) interleaved, {args.repeat} rounds, medians")
    print("                                        wall     (CPU)")
    print(f"(a) orjson per line + pd.DataFrame   {t_a:8.2f} s ({cpu_a:6.2f} s)")
    print(f"(b) pd.read_json(lines=True)         {t_b:8.2f} s ({cpu_b:6.2f} s)")
    print(f"(c) mnb.read_conversation (pages)    {t_c:8.2f} s ({cpu_c:6.2f} s)")
    print(f"(c) same, 2N messages                {t_c2:8.2f} s ({cpu_c2:6.2f} s)")
    print(
        "every round, wall s: "
        + "  ".join(f"{k}=" + "/".join(f"{w:.2f}" for w, _ in runs[k]) for k in ("a", "c", "c2"))
    )
    print(f"{tools:,} tool rows; the record is walked in {-(-n // 100):,} pages of 100")
    print("per round: c/a " + " ".join(f"{r:.3f}" for r in walk_ratios))
    print("per round: 2N/N " + " ".join(f"{r:.3f}" for r in scale_ratios))
    print(f"c/a = {walk_ratio:.3f} (goal <= 1.2)   2N/N = {scale_ratio:.3f} (goal <= 2.2)")
    print(
        f"warm read_messages(limit=100) at position {n // 2:,}: "
        f"p50 {p50_ms:.3f} ms, p99 {p99_ms:.3f} ms over {len(samples)} calls (goal p50 <= 0.5 ms)"
    )
    print(f"walk_ratio={walk_ratio:.3f} scale_ratio={scale_ratio:.3f} page_p50_ms={p50_ms:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
