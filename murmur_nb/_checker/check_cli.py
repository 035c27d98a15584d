"""``murmur-nb check PATH``: the module checker from a shell, for module authors and CI.

Prints the plain-text report (``--json`` for one JSON document) and exits 0 when no check
failed, 1 when one did, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys

from murmur_nb._checker.check import check_module
from murmur_nb._checker.check_boundaries import BOUNDARY_BUDGET_S, MAX_BOUNDARIES
from murmur_nb._exceptions import MissingDependency, ModuleNotFound
from murmur_nb._modules.policy import Policy

__all__ = ["add_check_parser", "run_check"]


def add_check_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``check`` subcommand to the ``murmur-nb`` parser."""
    check = sub.add_parser(
        "check",
        help="check a module folder against every modproto v1 rule (text report; --json)",
        description="Describe, validate and invoke a module with generated inputs in a "
        "temporary home, through the same host, policy and sandbox as a notebook.",
    )
    check.add_argument("module", help="a module folder, or the id of an installed module")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument("--examples", type=int, default=5,
                       help="random inputs generated per capability (default 5)")
    check.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    check.add_argument("--boundaries", type=int, default=MAX_BOUNDARIES, metavar="N",
                       help="at most N boundary inputs per capability, sent before the "
                       f"random ones (default {MAX_BOUNDARIES}; 0 for none)")
    check.add_argument("--budget", type=float, default=BOUNDARY_BUDGET_S, metavar="SECONDS",
                       help="time a capability's calls may take: each call's deadline "
                       "fits what is left, the inputs left out are counted in the report "
                       f"(default {BOUNDARY_BUDGET_S:g}; 0 for no limit)")
    check.add_argument("--approve", action="append", default=[], metavar="CAPABILITY",
                       help="also invoke this capability although it needs approval")


def run_check(args: argparse.Namespace, policy: Policy) -> int:
    """Run ``murmur-nb check``; return the exit status."""
    if args.examples < 1 or args.boundaries < 0 or not args.budget >= 0:
        print("murmur-nb check: --examples must be at least 1, --boundaries and --budget at "
              "least 0", file=sys.stderr)  # fmt: skip
        return 2
    try:
        report = check_module(
            args.module,
            home=args.home,
            policy=policy,
            examples=args.examples,
            seed=args.seed,
            approve=args.approve,
            boundaries=args.boundaries,
            budget=args.budget,
        )
    except (ModuleNotFound, MissingDependency) as exc:
        print(f"murmur-nb check: {exc}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(report.to_json(), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        print(report.summary())
    return 0 if report.ok else 1
