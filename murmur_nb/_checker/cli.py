"""``murmur-nb``: list, describe, invoke and check modproto modules from a shell.

Everything ``list``, ``describe`` and ``invoke`` print on standard output is one JSON
document, so the command composes with ``jq``; ``check`` and ``check-hook`` print a text
report (``--json`` for JSON; ``check-hook`` in :mod:`.hook_cli`). What each exit status means
is in :data:`_EXIT_STATUS`, which every ``--help`` prints: 0 success; 1 the module answered
``ok: false``, a descriptor was refused, every module listed was refused or a check failed; 2
bad usage; 3 the host refused or stopped the call (the JSON carries ``host_error.code``); 4
the checker itself failed (a bug in murmur-nb), never a verdict on the module; 130
interrupted.

Design notes
------------
* **Options where a user types them.** The options that say where modules are and what they
  may do (``--home``, ``--module-dir``, ``--policy``, ``--root`` ...) go before the subcommand
  or after it (``murmur-nb check --home h okmod``): each subcommand that runs modules takes
  them too, under a ``late_`` name merged after parsing (argparse would let a subcommand's
  value replace, not extend, a list given before it).
* **A module folder outside any home** (``--module-dir DIR``) is linked into a temporary
  home for the one command, as the checker links the folder it checks, so a check's
  reproduction line runs after the check.
* **A closed pipe ends the command quietly** (``murmur-nb check ... | head -1``): the rest of
  the output goes nowhere and the exit status is the command's (:func:`write_out`).
* **Words of the command, not of Python**: a host message's Python advice
  (``invoke(..., approve=True)``, ``host.modules()``) is said as the option or subcommand.
* **One reading of a policy.** The ``--policy`` file goes through ``Policy.from_mapping``,
  the rule a notebook's policy follows (``approved: probe.push`` is one name, ``roots: /data``
  is refused), and the options add to the policy it made: the command never reads a key
  itself (it split a one-name ``approved:`` into characters).
* **The runs folder outlives the command** where it can: ``<home>/runs`` by default, so the
  files an ``invoke`` prints (a fresh write root's artifacts) are there after it. Where it
  cannot be written (a shared, read-only home), or, for a root process, where another
  account could change the way to it (a link it planted there would have root make the call
  folders wherever it points), the host's own default, a private temporary folder removed
  when the command ends, is used, and ``invoke`` says so in one line. A root process's
  ``--runs-dir`` another account could change the way to is refused, before anything runs
  (:func:`~murmur_nb._modules.workspace.refuse_open_way`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import re
import sys
import tempfile
import textwrap
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from murmur_nb._checker.check import check_module
from murmur_nb._checker.check_boundaries import BOUNDARY_BUDGET_S, MAX_BOUNDARIES
from murmur_nb._checker.hook_cli import add_check_hook_parser, run_check_hook
from murmur_nb._exceptions import (
    ApprovalRequired,
    InvalidDescriptor,
    InvalidInput,
    MissingDependency,
    ModuleHostError,
    ModuleNotFound,
    ProtocolViolation,
)
from murmur_nb._files.scratch import remove_tree, temp_folder
from murmur_nb._files.trust import why_open_way
from murmur_nb._hooks.config import MAX_YAML_BYTES
from murmur_nb._modules.approval import APPROVE_IN_PYTHON
from murmur_nb._modules.host import ModuleHost
from murmur_nb._modules.invocation import Invocation, ModuleInfo
from murmur_nb._modules.policy import GRANT_KINDS, Policy
from murmur_nb._modules.request import check_bounds
from murmur_nb._modules.workspace import refuse_open_way
from murmur_nb._rules import NotReadable, facet_studio_home, printable_json, read_bounded

__all__ = ["main", "write_out"]

#: Python advice in host messages (a pattern), and what the command says instead.
_COMMAND_WORDS = (
    (r"host\.modules\(\) lists", "`murmur-nb list` shows"),
    (r"host\.describe\('([^']*)'\) lists them", r"`murmur-nb describe \1` lists them"),
    (r"Policy\(sandbox='best-effort'\)", "a --policy file with sandbox: best-effort"),
    (r"sandbox='off' to run", "sandbox: off to run"),
    (r"Policy\(network_isolation='none'\)", "a --policy file with network_isolation: none"),
    (r"Policy\(sandbox_mechanisms=\[\.\.\., '([^']*)'\]\)",
     r"the --policy file's sandbox_mechanisms: [..., \1]"),
    (r"map '([^']*)' to (an existing folder|a folder) in Policy\(roots=\.\.\.\)",
     r"map '\1' to \2: --root \1=DIR (or roots: in the --policy file)"),
    (r"home='([^']*)' is a file, not a facet-studio home: pass the folder",
     r"--home \1 is a file, not a facet-studio home: give the folder"),
)  # fmt: skip
#: The width ``--help`` fills its descriptions and exit status tables to.
_HELP_WIDTH = 78
#: How ``--grant publish=`` may say true, and false (anything else is refused).
_TRUE, _FALSE = frozenset({"1", "true", "yes", "on"}), frozenset({"0", "false", "no", "off"})
#: What each exit status means, per command (``None``: the command as a whole); every
#: ``--help`` prints its command's, under "exit status:".
_EXIT_STATUS: dict[str | None, dict[int, str]] = {
    None: {
        0: "success",
        1: "the module answered ok: false (invoke), its descriptor was refused (describe), "
        "every module found was refused (list), or a check or hook rule failed",
        2: "bad usage: an option or its value, a file that cannot be read, a home that is a "
        "file, no modules folder (list)",
        3: "the host refused or stopped the call (the JSON's host_error.code says why)",
        4: "the checker itself failed (check: a bug in murmur-nb, its traceback printed), "
        "never a verdict on the module",
        130: "interrupted (Ctrl-C)",
    },
    "list": {
        0: "listed; also an existing home with no module ([], and a note on stderr), and a "
        "home where only some modules were refused (a note says how many)",
        1: "every module found was refused (each listed with its errors)",
        2: "bad usage, or the home has no modules folder (the note names the folder "
        "searched)",
        3: "the host refused (no sandbox, say): host_error.code and message",
        130: "interrupted",
    },
    "describe": {
        0: "the module's accepted descriptor",
        1: "its descriptor was refused (host_error.errors says why)",
        2: "bad usage",
        3: "the host refused: no such module (module_not_found), no sandbox ...",
        130: "interrupted",
    },
    "invoke": {
        0: "the module answered ok: true",
        1: "the module answered ok: false (error.code says why)",
        2: "bad usage: an option or its value, the input, the policy, the home",
        3: "the host refused or stopped the call (approval_required, invalid_input, "
        "root_unavailable, a deadline ...): host_error.code and message",
        130: "interrupted; the module's process tree was killed",
    },
    "check": {
        0: "no check failed",
        1: "a check failed",
        2: "bad usage (a folder that is no module: the message names the home searched)",
        3: "the host refuses to run the module at all (no sandbox, say)",
        4: "the checker itself failed (a bug in murmur-nb, its traceback printed), never a "
        "verdict on the module",
        130: "interrupted; no report",
    },
    "check-hook": {
        0: "no rule failed",
        1: "a rule failed",
        2: "bad usage (no such file, an unusable --config)",
        130: "interrupted; no report",
    },
}


def write_out(text: str) -> None:
    """Write ``text`` to standard output; when its reader went away (``| head -1``), the rest
    of the output goes nowhere, quietly, as a closed pipe's would."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the flush at exit finds somewhere to go
        os.close(devnull)


def _pairs(values: Sequence[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise SystemExit(f"murmur-nb: {flag} takes NAME=VALUE, got {item!r}")
        out[name] = value
    return out


#: the most an ``--input-file`` (or the standard input) may hold: a module's input is a
#: JSON object (files go through roots); ``/dev/zero`` took the machine's memory
MAX_INPUT_BYTES = 64 << 20


def _read_file(path: str, flag: str, what: str, most: int) -> str:
    """The text of the file ``flag`` names, at most ``most`` bytes (a FIFO or a pipe, such
    as ``<(...)``, is read as ``cat`` would); a one-line usage error when it cannot be
    read."""
    try:
        return read_bounded(path, most, regular=False).decode("utf-8")
    except (OSError, NotReadable, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SystemExit(f"murmur-nb: {flag} {path}: cannot be read ({why}); give {what}") from None


#: what a JSON argument or file nested past what Python's reader follows is told
_TOO_DEEP = "is nested too deeply to read (Python's JSON reader stops near 1,000 levels)"


def _policy_file(path: str) -> dict[str, Any]:
    """The mapping a ``--policy`` file (JSON, or YAML by its suffix) holds."""
    text = _read_file(path, "--policy", "a policy file (.json or .yaml)", MAX_YAML_BYTES)
    if path.endswith((".yaml", ".yml")):
        import yaml  # noqa: PLC0415 - only for YAML policy files

        from murmur_nb._hooks.config import UniqueKeyLoader, YamlRefused  # noqa: PLC0415

        try:
            loaded = yaml.load(text, Loader=UniqueKeyLoader) or {}
        except yaml.YAMLError as exc:
            why = "refused" if isinstance(exc, YamlRefused) else "not valid YAML"
            raise SystemExit(f"murmur-nb: {path}: {why}: {exc}") from None
    else:
        try:
            loaded = json.loads(text)
        except ValueError as exc:
            raise SystemExit(f"murmur-nb: {path}: not valid JSON: {exc}") from None
        except RecursionError:
            raise SystemExit(f"murmur-nb: {path}: {_TOO_DEEP}") from None
    if not isinstance(loaded, dict):
        raise SystemExit(f"murmur-nb: {path} must hold a mapping of policy keys")
    return loaded


def _boolean(text: str, given: str) -> bool:
    """``text`` as true or false; a usage error naming ``given`` for anything else."""
    spelled = text.lower()
    if spelled in _TRUE or spelled in _FALSE:
        return spelled in _TRUE
    raise SystemExit(
        f"murmur-nb: --grant {given}: give true or false (or yes/no, on/off, 1/0); a value "
        "that is neither is never taken as a grant"
    )


def _option_changes(args: argparse.Namespace, policy: Policy) -> dict[str, Any]:
    """What ``--root``, ``--binary``, ``--grant`` and ``--allow`` add to ``policy``, as the
    keywords of :func:`dataclasses.replace`."""
    changes: dict[str, Any] = {}
    if args.root:
        changes["roots"] = {**policy.roots, **_pairs(args.root, "--root")}
    if args.binary:
        changes["binaries"] = {**policy.binaries, **_pairs(args.binary, "--binary")}
    for item in args.grant:
        kind, _, name = item.partition("=")
        if kind == "publish":
            changes["publish"] = _boolean(name, item)
        elif kind in GRANT_KINDS and name:
            changes[kind] = {*changes.get(kind, getattr(policy, kind)), name}
        else:
            raise SystemExit(
                f"murmur-nb: --grant takes KIND=NAME with KIND one of "
                f"{', '.join((*GRANT_KINDS, 'publish'))}; got {item}"
            )
    if args.allow:
        changes["approved"] = {*policy.approved, *args.allow}
    return changes


def _load_policy(args: argparse.Namespace) -> Policy:
    """The ``--policy`` file's policy (the default one without it) with the options added."""
    policy = Policy()
    if args.policy:
        try:
            policy = Policy.from_mapping(_policy_file(args.policy))
        except (TypeError, ValueError) as exc:
            raise SystemExit(f"murmur-nb: --policy {args.policy}: {exc}") from None
    try:
        return dataclasses.replace(policy, **_option_changes(args, policy))
    except (TypeError, ValueError) as exc:
        raise SystemExit(f"murmur-nb: bad policy: {exc}") from None


def _command_words(message: str) -> str:
    """``message`` with its Python advice said as the command's options and subcommands."""
    for python, command in _COMMAND_WORDS:
        message = re.sub(python, command, message)
    return message


def _host_error(exc: ModuleHostError) -> dict[str, Any]:
    err: dict[str, Any] = {"code": exc.code, "message": _command_words(exc.message)}
    if isinstance(exc, ApprovalRequired):
        err["reasons"] = exc.reasons
    if isinstance(exc, InvalidDescriptor):
        err["errors"] = [{"path": e.path, "detail": e.detail} for e in exc.errors]
    if isinstance(exc, ProtocolViolation):
        err["rule"] = exc.rule
    inv = exc.invocation
    if isinstance(inv, Invocation):
        err["request_id"] = inv.request_id
        err["execution"] = inv.execution.model_dump(mode="json")
        if inv.stderr:
            err["stderr_tail"] = inv.stderr[-2000:]
    return {"ok": False, "host_error": err}


def _invocation(inv: Invocation) -> dict[str, Any]:
    return {
        "ok": inv.ok,
        "module": inv.module,
        "capability": inv.capability,
        "request_id": inv.request_id,
        "approval": inv.approval,
        "duration_ms": round(inv.duration_ms, 3),
        "result": inv.result,
        "error": inv.error.model_dump(mode="json") if inv.error else None,
        "warnings": inv.warnings,
        "execution": inv.execution.model_dump(mode="json"),
        "artifacts": [
            {**a.model_dump(mode="json"), "file": str(a.file)} for a in inv.artifacts
        ],
        "rejected_artifacts": [
            {"id": r.id, "code": r.code, "message": r.message} for r in inv.rejected_artifacts
        ],
    }


def _list_row(host: ModuleHost, info: ModuleInfo) -> dict[str, Any]:
    """One module as ``list`` prints it: refused ones with their errors, accepted ones with
    what the host works around (``warnings``: a capability another module's id takes ...)."""
    desc = info.descriptor
    caps: list[dict[str, Any]] = []
    if desc is not None:
        caps = [
            {
                "id": cap.id,
                "title": cap.title,
                "summary": cap.summary,
                "long_running": cap.long_running,
                "approval_reasons": host.policy.approval_reasons(desc, cap),
            }
            for cap in desc.capabilities or []
        ]
    return {
        "id": info.id,
        "ok": info.ok,
        "name": desc.name if desc else None,
        "version": desc.version if desc else None,
        "needs_setup": info.needs_setup,
        "setup": info.setup_instructions,
        "errors": [{"path": e.path, "detail": e.detail} for e in info.errors],
        "warnings": [{"path": w.path, "detail": w.detail} for w in info.warnings],
        "capabilities": caps,
    }


def _list(host: ModuleHost) -> tuple[list[dict[str, Any]], int, str | None]:
    """``list``'s rows, its exit status and the note for standard error (``None``: none):
    an empty home is listed (0), a home whose every module was refused is not (1)."""
    rows = [_list_row(host, info) for info in host.modules()]
    refused = sum(not row["ok"] for row in rows)
    where = host.modules_dir
    if not rows:
        return rows, 0, f"murmur-nb list: no module in {where}"
    if refused == len(rows):
        said = f"every module in {where} was refused"
    elif refused:
        said = f"{refused} of {len(rows)} modules in {where} were refused"
    else:
        return rows, 0, None
    return rows, int(refused == len(rows)), f"murmur-nb list: {said}; their errors are listed"


def _read_input(args: argparse.Namespace) -> Any:
    """The input of ``invoke``: the argument, ``--input-file`` (``-``: standard input), or
    ``{}``; a usage error when both are given, or when it is not JSON."""
    if args.input is not None and args.input_file:
        raise SystemExit("murmur-nb: give the input as an argument or with --input-file, not both")
    text: str | None = args.input
    if args.input_file == "-":
        text = sys.stdin.read(MAX_INPUT_BYTES + 1)
        if len(text) > MAX_INPUT_BYTES:
            raise SystemExit(f"murmur-nb: the standard input holds more than the "
                             f"{MAX_INPUT_BYTES:,} bytes an input may be")  # fmt: skip
    elif args.input_file:
        text = _read_file(args.input_file, "--input-file", "a file holding the input JSON",
                          MAX_INPUT_BYTES)  # fmt: skip
    if text is None:
        return {}
    try:
        return json.loads(text)
    except ValueError as exc:
        raise SystemExit(f"murmur-nb: the input is not JSON: {exc}") from exc
    except RecursionError:
        raise SystemExit(f"murmur-nb: the input {_TOO_DEEP}") from None


def _check_bounds(args: argparse.Namespace, policy: Policy) -> None:
    """``--deadline-ms`` and ``--max-output-bytes`` positive and within the policy's bounds
    (the host's rule), or a usage error in the command's words."""
    for flag, value, name, unit in (
        ("--deadline-ms", args.deadline_ms, "deadline_ms", "milliseconds"),
        ("--max-output-bytes", args.max_output_bytes, "max_output_bytes", "bytes"),
    ):
        if value is None:
            continue
        limit: int = getattr(policy, f"{name}_limit")
        try:
            check_bounds({name: value}, {name: limit})
        except InvalidInput:
            raise SystemExit(
                f"murmur-nb: {flag} {value}: give a positive number of {unit}, at most {limit} "
                f"(the policy's {name}_limit), or leave it out for the policy's {name}"
            ) from None


def _read_extra(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--extra`` as a JSON object, or ``None`` when not given."""
    if not args.extra:
        return None
    try:
        extra = json.loads(args.extra)
    except ValueError as exc:
        raise SystemExit(f"murmur-nb: --extra is not JSON: {exc}") from exc
    except RecursionError:
        raise SystemExit(f"murmur-nb: --extra {_TOO_DEEP}") from None
    if not isinstance(extra, dict):
        raise SystemExit("murmur-nb: --extra must be a JSON object, like '{\"trace\": true}'")
    return extra


#: The options that may come before the subcommand or after it: flag -> add_argument keywords.
_PLACE_OPTIONS: dict[str, dict[str, Any]] = {
    "--home": {"metavar": "DIR",
               "help": "facet-studio home (default: $FACET_STUDIO_HOME or ~/.facet-studio)"},
    "--module-dir": {"metavar": "DIR", "help": "a module folder outside any home (one you "
                     "are writing): linked into a temporary home for this command, which "
                     "goes with it (its runs and artifact store too, unless --runs-dir or "
                     "--store name others)"},
    "--store": {"metavar": "DIR",
                "help": "artifact store folder (default: <home>/artifact-store)"},
    "--runs-dir": {"metavar": "DIR",
                   "help": "folder for per-invocation work and fresh write roots (default: "
                   "<home>/runs, where the files an invoke prints stay; where that cannot be "
                   "written, or for root where another account could change the way to it, a "
                   "private temporary folder removed when the command ends)"},
    "--policy": {"metavar": "FILE", "help": "policy file (.json, .yaml): Policy keys"},
    "--root": {"action": "append", "metavar": "NAME=PATH",
               "help": "map a logical root name to a folder"},
    "--grant": {"action": "append", "metavar": "KIND=NAME",
                "help": "allow a grant: network, credentials, paid_providers, subprocess "
                "('*' for all declared) or publish=true|false"},
    "--binary": {"action": "append", "metavar": "NAME=PATH",
                 "help": "resolve a subprocess name to an absolute path"},
    "--allow": {"action": "append", "metavar": "CAPABILITY",
                "help": "pre-approve a capability (pinned to its current descriptor)"},
}  # fmt: skip


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def _add_place_options(parser: argparse.ArgumentParser, *, late: bool) -> None:
    """The options of :data:`_PLACE_OPTIONS`; ``late``: as a subcommand takes them, each
    under ``late_<name>``, ``None`` when not given (merged by :func:`_merge_late`)."""
    for flag, spec in _PLACE_OPTIONS.items():
        listed = spec.get("action") == "append"
        if late:
            parser.add_argument(flag, **spec, dest=f"late_{_dest(flag)}", default=None)
        else:
            parser.add_argument(flag, **spec, default=[] if listed else None)


def _merge_late(args: argparse.Namespace) -> None:
    """Options given after the subcommand: a list extends the one given before it, a single
    value replaces it."""
    for flag, spec in _PLACE_OPTIONS.items():
        late = vars(args).pop(f"late_{_dest(flag)}", None)
        if late is None:
            continue
        early = getattr(args, _dest(flag))
        setattr(args, _dest(flag), early + late if spec.get("action") == "append" else late)


def _add_check_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``check`` subcommand."""
    check = sub.add_parser(
        "check",
        help="check a module folder against every modproto v1 rule (text report; --json)",
        description="Describe, validate and invoke a module with generated inputs in a "
        "temporary home, through the same host, policy and sandbox as a notebook.",
    )
    check.add_argument("module", help="a module folder, or the id of an installed module")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument("--examples", type=int, default=5, metavar="N",
                       help="random inputs generated per capability (default 5)")  # fmt: skip
    check.add_argument("--seed", type=int, default=0, metavar="N",
                       help="generator seed (default 0)")  # fmt: skip
    check.add_argument("--boundaries", type=int, default=MAX_BOUNDARIES, metavar="N",
                       help="at most N boundary inputs per capability, sent before the "
                       f"random ones (default {MAX_BOUNDARIES}; 0 for none)")
    check.add_argument("--budget", type=float, default=BOUNDARY_BUDGET_S, metavar="SECONDS",
                       help="time a capability's calls may take: each call's deadline "
                       "fits what is left, the inputs left out are counted in the report "
                       f"(default {BOUNDARY_BUDGET_S:g}; 0 for no limit)")
    check.add_argument("--approve", action="append", default=[], metavar="CAPABILITY",
                       help="also invoke this capability although it needs approval")
    _add_place_options(check, late=True)


def _check_usage(args: argparse.Namespace) -> str | None:
    """What is wrong with ``murmur-nb check``'s options, or ``None``."""
    if args.examples < 1 or args.boundaries < 0 or not args.budget >= 0:
        return "--examples must be at least 1, --boundaries and --budget at least 0"
    if args.module_dir:
        return f"give the module folder itself: murmur-nb check {args.module_dir}"
    return None


def _run_check(args: argparse.Namespace, policy: Policy) -> int:
    """Run ``murmur-nb check``; return the exit status (4: the checker itself failed)."""
    problem = _check_usage(args)
    if problem is not None:
        print(f"murmur-nb check: {problem}", file=sys.stderr)
        return 2
    try:
        report = check_module(
            args.module, home=args.home, policy=policy, examples=args.examples,
            seed=args.seed, approve=args.approve, boundaries=args.boundaries,
            budget=args.budget,
        )  # fmt: skip
    except (ModuleNotFound, MissingDependency) as exc:
        print(f"murmur-nb check: {_command_words(str(exc))}", file=sys.stderr)
        return 2
    except ModuleHostError as exc:  # the host refused to run it (no sandbox, say)
        print(f"murmur-nb check: {exc.code}: {_command_words(exc.message)}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("murmur-nb check: interrupted; no report", file=sys.stderr)
        return 130
    except Exception:  # a bug of the checker: its own status, never "failed"
        traceback.print_exc()
        print("murmur-nb check: the checker itself failed (a bug in murmur-nb, not a verdict "
              "on the module); please report it with the traceback above", file=sys.stderr)
        return 4
    write_out((report.to_json(indent=2) if args.json else report.summary()) + "\n")
    return 0 if report.ok else 1


def _lay_out(parser: argparse.ArgumentParser, command: str | None) -> None:
    """End ``parser``'s ``--help`` with the exit statuses of ``command``, as a table (argparse
    would fill it into one paragraph, so its description is filled here instead)."""
    lines = ["exit status:"]
    for code, meaning in _EXIT_STATUS[command].items():
        first, *rest = textwrap.wrap(meaning, width=_HELP_WIDTH - 7)
        lines += [f"  {code:<4} {first}", *(" " * 7 + line for line in rest)]
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    if parser.description:
        parser.description = textwrap.fill(parser.description, width=_HELP_WIDTH)
    parser.epilog = "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="murmur-nb",
        description="List, describe, invoke and check modproto v1 modules (list, describe and "
        "invoke print JSON on standard output). The options before the subcommand may also "
        "follow it; each subcommand's --help says what its exit statuses mean.",
    )
    _add_place_options(parser, late=False)
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="every installed module, refused ones with their errors")
    _add_place_options(listing, late=True)
    describe = sub.add_parser("describe", help="one module's validated descriptor")
    describe.add_argument("module")
    _add_place_options(describe, late=True)
    invoke = sub.add_parser("invoke", help="invoke a capability and print the invocation")
    invoke.add_argument("capability")
    invoke.add_argument("input", nargs="?", help="input as JSON (default: {})")
    invoke.add_argument("--input-file", metavar="FILE",
                        help="read the input JSON from a file, or - for stdin "
                        "(instead of the input argument)")  # fmt: skip
    invoke.add_argument("--approve", action="store_true", help="operator approval for this call")
    invoke.add_argument("--deadline-ms", type=int, metavar="MS",
                        help="the call's wall-clock budget (default: the policy's deadline_ms)")
    invoke.add_argument("--max-output-bytes", type=int, metavar="BYTES",
                        help="the module's standard-output ceiling (default: the policy's "
                        "max_output_bytes)")  # fmt: skip
    invoke.add_argument("--extra", metavar="JSON",
                        help="extra root-level request fields, as a JSON object")  # fmt: skip
    invoke.add_argument("--no-validate", dest="validate", action="store_false",
                        help="send the input even when the request schema refuses it (how "
                        "'murmur-nb check' tries a module's answer to bad input)")  # fmt: skip
    _add_place_options(invoke, late=True)
    _add_check_parser(sub)
    add_check_hook_parser(sub)
    _lay_out(parser, None)
    for name, subparser in sub.choices.items():
        _lay_out(subparser, name)
    return parser


@contextlib.contextmanager
def _facet_home(args: argparse.Namespace) -> Iterator[Path]:
    """The facet-studio home of this command: ``--home``, the default, or, for
    ``--module-dir``, a temporary one linking to that folder (removed afterwards)."""
    if not args.module_dir:
        yield Path(args.home) if args.home else facet_studio_home()
        return
    folder = Path(args.module_dir).expanduser().resolve()
    home = Path(tempfile.mkdtemp(prefix="murmur-nb-module-dir-", dir=temp_folder()))
    try:
        (home / "modules").mkdir()
        (home / "modules" / folder.name).symlink_to(folder, target_is_directory=True)
        yield home
    finally:
        remove_tree(home)


def _unwritable(folder: Path) -> str | None:
    """Why this account cannot make or write ``folder``, or ``None`` when it can."""
    if folder.is_dir():
        return None if os.access(folder, os.W_OK | os.X_OK) else "not writable"
    if os.path.lexists(folder):
        return "not a folder"
    above = folder.parent
    while not os.path.lexists(above):
        above = above.parent
    if not above.is_dir():
        return f"{above} is not a folder"
    return None if os.access(above, os.W_OK | os.X_OK) else f"{above} is not writable"


def _usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with where the command looks for modules and works, or ``None``."""
    if args.module_dir and args.home:
        return "give --home (an installed module) or --module-dir (a folder), not both"
    if args.module_dir and not (Path(args.module_dir).expanduser() / "module").is_file():
        return (f"--module-dir {args.module_dir}: not a module folder (no executable file "
                "'module' in it)")  # fmt: skip
    if not args.runs_dir:
        return None
    try:
        refuse_open_way(args.runs_dir)  # a root process: nobody else may lead it elsewhere
    except ValueError as exc:
        return str(exc)
    why = _unwritable(Path(args.runs_dir))
    if why is not None:
        return f"--runs-dir {args.runs_dir}: cannot be used ({why}); give a folder you can write"
    return None


def _runs_dir(args: argparse.Namespace, home: Path) -> tuple[Path | None, str | None]:
    """The runs folder for ``ModuleHost(runs_dir=)`` (``None``: the host's private temporary
    one) and, when the default could not be kept, the note that says so (design notes)."""
    if args.runs_dir:
        return Path(args.runs_dir), None
    runs = home / "runs"
    why = why_open_way(runs) or _unwritable(runs)  # root's folders go where nobody else leads
    if why is None:
        return runs, None
    return None, (
        f"murmur-nb: {runs} cannot be used ({why}): this call's working folders and fresh write "
        "roots are in a private temporary folder, removed when the command ends; pass "
        "--runs-dir DIR to keep them"
    )


def _invoke_call(args: argparse.Namespace, policy: Policy) -> tuple[Any, dict[str, Any] | None]:
    """``invoke``'s input and ``--extra``, its bounds checked: a usage error before anything
    runs."""
    _check_bounds(args, policy)
    return _read_input(args), _read_extra(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``murmur-nb`` command; return its exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    _merge_late(args)
    try:
        policy = _load_policy(args)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.command == "check":
        return _run_check(args, policy)
    if args.command == "check-hook":
        status, text = run_check_hook(args)
        write_out(text)
        return status
    problem = _usage_problem(args)
    if problem is not None:
        print(f"murmur-nb: {problem}", file=sys.stderr)
        return 2
    try:
        call = _invoke_call(args, policy) if args.command == "invoke" else None
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    with _facet_home(args) as home:
        return _run_host_command(args, policy, home, call)


def _run_host_command(
    args: argparse.Namespace,
    policy: Policy,
    home: Path,
    call: tuple[Any, dict[str, Any] | None] | None,
) -> int:
    """``list``, ``describe`` or ``invoke`` (``call``: its input and extra fields) against
    ``home``: one JSON document out."""
    runs, note = _runs_dir(args, home)
    try:
        host = ModuleHost(home=home, policy=policy, artifact_store=args.store, runs_dir=runs)
    except ValueError as exc:  # a home that is a file
        said = _command_words(str(exc))
        if not args.home:  # $FACET_STUDIO_HOME or the default named it, not --home
            said = said.replace("--home ", "the home ", 1)
        print(f"murmur-nb: {said}", file=sys.stderr)
        return 2
    with host:
        if args.command == "list" and not host.modules_dir.is_dir():
            print(f"murmur-nb list: no modules folder {host.modules_dir} (the home "
                  f"{'has none' if home.is_dir() else 'does not exist'}); give --home, or set "
                  "$FACET_STUDIO_HOME, the folder that holds modules/<id>/module",
                  file=sys.stderr)  # fmt: skip
            return 2
        if note is not None and args.command == "invoke":
            print(note, file=sys.stderr)
        try:
            output, status = _answer(args, host, call)
        except KeyboardInterrupt:
            print("murmur-nb: interrupted; the module's process tree was killed", file=sys.stderr)
            return 130
    write_out(printable_json(output, indent=2) + "\n")
    return status


def _answer(
    args: argparse.Namespace, host: ModuleHost, call: tuple[Any, dict[str, Any] | None] | None
) -> tuple[Any, int]:
    """What ``list``, ``describe`` or ``invoke`` prints, and its exit status."""
    try:
        if args.command == "list":
            rows, status, said = _list(host)
            if said is not None:
                print(said, file=sys.stderr)
            return rows, status
        if args.command == "describe":
            return host.describe(args.module).model_dump(mode="json"), 0
        assert call is not None
        value, extra = call
        inv = host.invoke(args.capability, value, approve=args.approve,
                          deadline_ms=args.deadline_ms, max_output_bytes=args.max_output_bytes,
                          extra=extra, validate_input=args.validate)  # fmt: skip
        return _invocation(inv), 0 if inv.ok else 1
    except InvalidDescriptor as exc:
        return _host_error(exc), 1 if args.command == "describe" else 3
    except ApprovalRequired as exc:
        output = _host_error(exc)
        output["host_error"]["message"] = exc.message.replace(
            APPROVE_IN_PYTHON,
            f"Approve it with --approve (this call) or --allow {args.capability} (pinned "
            "to its current descriptor)",
        )
        return output, 3
    except ModuleHostError as exc:
        return _host_error(exc), 3


if __name__ == "__main__":  # pragma: no cover - python -m murmur_nb._checker.cli
    sys.exit(main())
