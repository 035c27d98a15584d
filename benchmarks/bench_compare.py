"""Two versions of the package side by side: the host CPU a sandboxed run (or a map row) costs
in this checkout against another revision, in paired rounds on the same machine at once.

Run: ``python benchmarks/bench_compare.py --base REV [--mode run|map] [--rows N]
[--rounds R]`` from a git checkout (``REV``: anything ``git archive`` takes, ``HEAD~1``,
``main``, a commit).

Why. On a shared machine the figures of ``bench_batch.py`` move by a quarter within an hour,
so a change worth 2-5 % of a run cannot be seen by running the benchmark before and after it.
Here both versions are warm at once, each in its own process (the base revision exported
with ``git archive`` into a temporary folder and put first on that process's
``PYTHONPATH``), and they take turns: round ``i`` runs ``--rows`` calls in one, then in the
other (the order swapped every round), so both see the same machine within seconds. Each
round's figure is the process's CPU time (``time.process_time()``: every thread of the
kernel, not the module processes) over its rows, per row. What is printed is the paired
difference, this checkout minus the base, per round: its median, its mean, and a bootstrap
95 % interval of the median. A change is shown when that interval leaves out 0.

Both processes run the same module (``bench_batch.py``'s trivial ``/bin/sh`` one, through the
host's default policy) the way the benchmarks do: ``run`` a loop of ``PreparedCall.run``
with inputs checked once (as a batch runs its rows), ``map`` whole local batches of
``--rows`` rows (a fresh journal each round).

The last line is ``mode=<m> rounds=<r> base_cpu_us=<b> head_cpu_us=<h> cpu_diff_us=<d>
cpu_change=<c> ci_low_us=<l> ci_high_us=<u> wall_change=<w>`` (``c`` and ``w``: the median
paired difference over the base's median, as a fraction; negative is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def export(rev: str, into: Path) -> Path:
    """The tree of ``rev`` (of the repository this file is in) written under ``into``."""
    archive = into / "base.tar"
    subprocess.run(["git", "archive", "--format=tar", "-o", str(archive), rev],
                   cwd=HERE.parent, check=True)  # fmt: skip
    tree = into / "base"
    tree.mkdir()
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    archive.unlink()
    return tree


class Side:
    """One version, warm in a worker process of its own, answering one round at a time."""

    def __init__(self, name: str, tree: Path, mode: str, rows: int) -> None:
        self.name = name
        env = {**os.environ, "PYTHONPATH": str(tree)}
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", "--mode", mode,
             "--rows", str(rows)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=tree,
        )  # fmt: skip
        ready = self._read()
        self.package = ready["package"]
        if Path(self.package).resolve().parent != tree.resolve():
            raise SystemExit(f"{name}: imported murmur_nb from {self.package}, not {tree}")

    def _read(self) -> dict[str, object]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"{self.name}: the worker ended (exit {self.process.wait()})")
        answer: dict[str, object] = json.loads(line)
        return answer

    def round(self) -> tuple[float, float]:
        """``(CPU us per row, wall us per row)`` of one round."""
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        answer = self._read()
        return float(answer["cpu_us"]), float(answer["wall_us"])  # type: ignore[arg-type]

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=120)


def worker(mode: str, rows: int) -> int:
    """Serve rounds on standard input ("go"), one JSON line each on standard output."""
    import murmur_nb as mnb  # from this worker's PYTHONPATH

    sys.path.insert(0, str(HERE))
    from bench_batch import install

    out = sys.stdout
    sys.stdout = sys.stderr  # nothing else may write on the answers' line
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        home = Path(tmp, "home")
        with mnb.ModuleHost(home=home) as host:
            install(host.home)
            host.invoke("benchsh.run", {"count": -1})  # describe, approve, snapshot
            inputs = [{"count": i} for i in range(rows)]
            prepared = host.prepare("benchsh.run")
            for value in inputs[:50]:  # warm: the zygote, the kept plan, the validators
                prepared.run(value, checked=True, ahead=False)
            out.write(json.dumps({"package": str(Path(mnb.__file__).parent)}) + "\n")
            out.flush()
            for done, _ in enumerate(iter(sys.stdin.readline, "")):
                cpu, wall = time.process_time(), time.perf_counter()
                if mode == "run":
                    for value in inputs:
                        prepared.run(value, checked=True, ahead=False)
                else:
                    journal = Path(tmp, f"round-{done}.sqlite")
                    host.map("benchsh.run", inputs, progress=False, journal=journal)
                    journal.unlink(missing_ok=True)
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                out.write(json.dumps({"cpu_us": cpu * 1e6 / rows, "wall_us": wall * 1e6 / rows}))
                out.write("\n")
                out.flush()
    return 0


def median_interval(diffs: list[float], draws: int = 4000) -> tuple[float, float]:
    """A bootstrap 95 % interval of the median of ``diffs`` (seeded: the same rounds give the
    same interval)."""
    pick = random.Random(7)
    medians = sorted(
        statistics.median(pick.choices(diffs, k=len(diffs))) for _ in range(draws)
    )
    return medians[int(0.025 * draws)], medians[int(0.975 * draws) - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="the revision to compare this checkout with")
    parser.add_argument("--mode", choices=["run", "map"], default="run")
    parser.add_argument("--rows", type=int, default=200, help="calls (or map rows) a round")
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.mode, args.rows)
    if not args.base:
        parser.error("--base REV is needed")
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        base_tree = export(args.base, Path(tmp))
        sides = {"base": Side("base", base_tree, args.mode, args.rows),
                 "head": Side("head", HERE.parent, args.mode, args.rows)}  # fmt: skip
        try:
            figures: dict[str, list[tuple[float, float]]] = {"base": [], "head": []}
            for i in range(args.rounds):
                order = ("base", "head") if i % 2 == 0 else ("head", "base")
                for name in order:
                    figures[name].append(sides[name].round())
        finally:
            for side in sides.values():
                side.close()
    base_cpu = [c for c, _ in figures["base"]]
    head_cpu = [c for c, _ in figures["head"]]
    diffs = [h - b for h, b in zip(head_cpu, base_cpu, strict=True)]
    wall_diffs = [h - b for (_, h), (_, b) in zip(figures["head"], figures["base"], strict=True)]
    low, high = median_interval(diffs)
    base_median = statistics.median(base_cpu)
    diff = statistics.median(diffs)
    wall_change = statistics.median(wall_diffs) / statistics.median(w for _, w in figures["base"])
    print(f"{args.mode}: {args.rounds} rounds of {args.rows} rows each way, {args.base} "
          f"against this checkout")  # fmt: skip
    print("base CPU us/row:", " ".join(f"{c:.0f}" for c in base_cpu))
    print("head CPU us/row:", " ".join(f"{c:.0f}" for c in head_cpu))
    print(
        f"head - base: median {diff:+.1f} us a row (mean {statistics.mean(diffs):+.1f}; "
        f"95 % interval of the median {low:+.1f} to {high:+.1f}), "
        f"{diff / base_median:+.1%} of the base's {base_median:.0f} us"
    )
    print(
        f"mode={args.mode} rounds={args.rounds} base_cpu_us={base_median:.1f} "
        f"head_cpu_us={statistics.median(head_cpu):.1f} cpu_diff_us={diff:.1f} "
        f"cpu_change={diff / base_median:.4f} ci_low_us={low:.1f} ci_high_us={high:.1f} "
        f"wall_change={wall_change:.4f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
