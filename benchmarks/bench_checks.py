"""Schema checks of hostile and bulk output: the worst case within the budget, and bulk speed.

Run: ``python benchmarks/bench_checks.py [--bound MiB] [--objects N]``

1. *Worst pattern check.* Patterns built against the host's engine (exponential for a
   backtracking engine; a DFA with about two million states) are checked, through the one
   check every schema check takes (``murmur_nb._schemas.bounded.check``), against the input
   each is slowest on, at sizes up to the output bound. The slowest, best of five, is
   ``worst_check_ms``: the longest one check can take a module's patterns to answer.
   Goal: under 50 ms. The same scan done by RE2 directly is printed beside it, so the
   host's own share is visible.
2. *Bulk results.* ``--objects`` small objects (300,000 make 15 MiB of JSON) are checked
   against an ordinary items schema with the fast accept (``jsonschema-rs``) and by
   ``jsonschema`` alone, interleaved; ``bulk_speedup`` is the ratio of the two.

The last line is ``worst_check_ms=<x> bulk_speedup=<y>``.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

from murmur_nb._schemas.bounded import check, fast_validator
from murmur_nb._schemas.patterns import compile_pattern
from murmur_nb._schemas.schemas import validator_for

_MIB = 1 << 20


def _best(action: Callable[[], Any], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def _hostile_inputs() -> list[tuple[str, Callable[[int], str]]]:
    rng = random.Random(1)
    block = "".join(rng.choice("ab") for _ in range(1 << 16))

    def ab(n: int) -> str:
        return (block * (n // len(block) + 1))[:n]

    return [
        ("^(a+)+$", lambda n: "a" * n + "!"),
        ("[ab]*a[ab]{20}$", ab),
        ("(a|b)*a(a|b){12}c", ab),
    ]


def worst_pattern(bound: int) -> float:
    worst = 0.0
    sizes = sorted({_MIB, 4 * _MIB - 1024, bound})
    for pattern, make in _hostile_inputs():
        validator = validator_for({"properties": {"s": {"pattern": pattern}}})
        for size in sizes:
            instance = {"s": make(size)}
            checked = _best(lambda v=validator, i=instance: check(v, i), 5)
            regex = compile_pattern(pattern)
            raw = _best(lambda r=regex, text=instance["s"]: r.search(text), 3)
            print(f"  {pattern:<18} {size / _MIB:6.2f} MiB: check {checked:7.1f} ms "
                  f"(RE2 alone over the whole string: {raw:7.1f} ms)")
            worst = max(worst, checked)
    return worst


def bulk(objects: int, rounds: int) -> float:
    schema = {"type": "array", "items": {"type": "object", "required": ["id"], "properties": {
        "id": {"type": "integer"}, "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}}}
    items = [{"id": i, "name": f"item {i}", "tags": ["a", "b"]} for i in range(objects)]
    validator = validator_for(schema)
    fast = fast_validator(schema)
    with_fast: list[float] = []
    alone: list[float] = []
    for _ in range(rounds):
        with_fast.append(_best(lambda: check(validator, items, fast=fast), 1))
        alone.append(_best(lambda: check(validator, items), 1))
    print(f"bulk: {objects:,} objects, fast accept {min(with_fast):.0f} ms, jsonschema alone "
          f"{min(alone):.0f} ms (best of {rounds}, interleaved)")
    return min(alone) / min(with_fast)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bound", type=int, default=16, help="output bound in MiB")
    parser.add_argument("--objects", type=int, default=300_000, help="objects in the bulk result")
    parser.add_argument("--rounds", type=int, default=2, help="bulk rounds")
    args = parser.parse_args()
    print("worst pattern checks (best of 5):")
    worst = worst_pattern(args.bound * _MIB)
    speedup = bulk(args.objects, args.rounds)
    print(f"worst_check_ms={worst:.1f} bulk_speedup={speedup:.0f}")


if __name__ == "__main__":
    main()
