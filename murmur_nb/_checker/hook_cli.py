"""``murmur-nb check-hook COMPONENT.wasm``: the hook checker from a shell, for hook authors and CI.

Gives the plain-text report (``--json`` for one JSON document) for the command to print (a
closed pipe ends it quietly: :func:`murmur_nb._checker.cli.write_out`) and exits 0 when no
rule failed, 1 when one did, 2 on bad usage (no such file, an unusable ``--config``), 130 on
Ctrl-C. A progress bar of the calls goes to standard error when it is a terminal.
"""

from __future__ import annotations

import argparse
import sys

from murmur_nb._checker.hook_check import check_hook
from murmur_nb._exceptions import HookError

__all__ = ["add_check_hook_parser", "run_check_hook"]


def add_check_hook_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``check-hook`` subcommand to the ``murmur-nb`` parser."""
    check = sub.add_parser(
        "check-hook",
        help="check a hook component against the hook world's rules (text report; --json)",
        description="Check the exports and imports of a hook component, then run both "
        "handlers on generated records in the kernel's own hook host, with and without the "
        "read grant, under the limits of murmur.yaml.",
    )
    check.add_argument("component", help="the hook's .wasm component")
    check.add_argument("--config", metavar="MURMUR_YAML",
                       help="take the limits from this murmur.yaml (the entry naming the "
                       "component, else hook_limits); default: the built-in limits")
    check.add_argument("--hook-id", metavar="ID", help="the murmur.yaml entry whose limits apply")
    check.add_argument("--json", action="store_true", help="print the report as JSON")


def run_check_hook(args: argparse.Namespace) -> tuple[int, str]:
    """Run ``murmur-nb check-hook``; return the exit status and what to print on standard
    output (the command prints it, a closed pipe quietly)."""
    if args.hook_id is not None and args.config is None:  # check_hook's words are its own
        print("murmur-nb check-hook: --hook-id names an entry of a murmur.yaml; pass "
              "--config MURMUR_YAML too", file=sys.stderr)  # fmt: skip
        return 2, ""
    try:
        report = check_hook(args.component, config=args.config, hook_id=args.hook_id)
    except HookError as exc:  # HookConfigError too
        print(f"murmur-nb check-hook: {exc}", file=sys.stderr)
        return 2, ""
    except KeyboardInterrupt:
        print("murmur-nb check-hook: interrupted; no report", file=sys.stderr)
        return 130, ""
    text = report.to_json(indent=2) if args.json else report.summary()
    return (0 if report.ok else 1), text + "\n"
