"""``murmur-nb``: list, describe, invoke and check modproto modules from a shell.

Everything ``list``, ``describe`` and ``invoke`` print on standard output is one JSON
document, so the command composes with ``jq``; ``check`` and ``check-hook`` print a text
report (``--json`` for JSON; ``check-hook`` in :mod:`.hook_cli`). Exit status: 0 success; 1
the module answered ``ok: false``, its descriptor was refused or a check (or a hook rule)
failed; 2 bad usage; 3 the host refused or stopped the call (the JSON carries
``host_error.code``, the stable host code, and its message); 4 the checker itself failed (a
bug in murmur-nb, its traceback printed), never a verdict on the module; 130 interrupted.

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
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
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
    MissingDependency,
    ModuleHostError,
    ModuleNotFound,
    ProtocolViolation,
)
from murmur_nb._files.scratch import remove_tree
from murmur_nb._modules.approval import APPROVE_IN_PYTHON
from murmur_nb._modules.host import ModuleHost
from murmur_nb._modules.invocation import Invocation
from murmur_nb._modules.policy import GRANT_KINDS, Policy
from murmur_nb._rules import facet_studio_home

__all__ = ["main", "write_out"]

#: Python advice in host messages (a pattern), and what the command says instead.
_COMMAND_WORDS = (
    (r"host\.modules\(\) lists", "`murmur-nb list` shows"),
    (r"host\.describe\('([^']*)'\) lists them", r"`murmur-nb describe \1` lists them"),
    (r"Policy\(sandbox='best-effort'\)", "a --policy file with sandbox: best-effort"),
    (r"sandbox='off' to run", "sandbox: off to run"),
)


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


def _read_file(path: str, flag: str, what: str) -> str:
    """The text of the file ``flag`` names; a one-line usage error when it cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise SystemExit(f"murmur-nb: {flag} {path}: cannot be read ({why}); give {what}") from None


def _load_policy(args: argparse.Namespace) -> Policy:
    data: dict[str, Any] = {}
    if args.policy:
        text = _read_file(args.policy, "--policy", "a policy file (.json or .yaml)")
        if args.policy.endswith((".yaml", ".yml")):
            import yaml  # noqa: PLC0415 - only for YAML policy files

            from murmur_nb._hooks.config import UniqueKeyLoader  # noqa: PLC0415

            try:
                loaded = yaml.load(text, Loader=UniqueKeyLoader) or {}
            except yaml.YAMLError as exc:
                raise SystemExit(f"murmur-nb: {args.policy}: not valid YAML: {exc}") from None
        else:
            try:
                loaded = json.loads(text)
            except ValueError as exc:
                raise SystemExit(f"murmur-nb: {args.policy}: not valid JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise SystemExit(f"murmur-nb: {args.policy} must hold a mapping of policy keys")
        data.update(loaded)
    roots = dict(data.get("roots") or {})
    roots.update(_pairs(args.root, "--root"))
    data["roots"] = roots
    binaries = dict(data.get("binaries") or {})
    binaries.update(_pairs(args.binary, "--binary"))
    data["binaries"] = binaries
    for kind, name in (item.partition("=")[::2] for item in args.grant):
        if kind == "publish":
            data["publish"] = name.lower() in {"1", "true", "yes"}
            continue
        if kind not in GRANT_KINDS or not name:
            raise SystemExit(
                f"murmur-nb: --grant takes KIND=NAME with KIND one of "
                f"{', '.join((*GRANT_KINDS, 'publish'))}; got {kind}={name}"
            )
        data[kind] = [*list(data.get(kind) or []), name]
    data["approved"] = [*list(data.get("approved") or []), *args.allow]
    try:
        return Policy.from_mapping(data)
    except (TypeError, ValueError) as exc:
        raise SystemExit(f"murmur-nb: bad policy: {exc}") from exc


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


def _list(host: ModuleHost) -> tuple[Any, int]:
    rows = []
    for info in host.modules():
        desc = info.descriptor
        caps = []
        if desc is not None:
            for cap in desc.capabilities or []:
                caps.append(
                    {
                        "id": cap.id,
                        "title": cap.title,
                        "summary": cap.summary,
                        "long_running": cap.long_running,
                        "approval_reasons": host.policy.approval_reasons(desc, cap),
                    }
                )
        rows.append(
            {
                "id": info.id,
                "ok": info.ok,
                "name": desc.name if desc else None,
                "version": desc.version if desc else None,
                "needs_setup": info.needs_setup,
                "setup": info.setup_instructions,
                "errors": [{"path": e.path, "detail": e.detail} for e in info.errors],
                "capabilities": caps,
            }
        )
    return rows, 0


def _read_input(args: argparse.Namespace) -> Any:
    text: str | None = args.input
    if args.input_file == "-":
        text = sys.stdin.read()
    elif args.input_file:
        text = _read_file(args.input_file, "--input-file", "a file holding the input JSON")
    if text is None:
        return {}
    try:
        return json.loads(text)
    except ValueError as exc:
        raise SystemExit(f"murmur-nb: the input is not JSON: {exc}") from exc


def _read_extra(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--extra`` as a JSON object, or ``None`` when not given."""
    if not args.extra:
        return None
    try:
        extra = json.loads(args.extra)
    except ValueError as exc:
        raise SystemExit(f"murmur-nb: --extra is not JSON: {exc}") from exc
    if not isinstance(extra, dict):
        raise SystemExit("murmur-nb: --extra must be a JSON object, like '{\"trace\": true}'")
    return extra


#: The options that may come before the subcommand or after it: flag -> add_argument keywords.
_PLACE_OPTIONS: dict[str, dict[str, Any]] = {
    "--home": {"help": "facet-studio home (default: $FACET_STUDIO_HOME or ~/.facet-studio)"},
    "--module-dir": {"metavar": "DIR", "help": "a module folder outside any home (one you "
                     "are writing): linked into a temporary home for this command, which "
                     "goes with it (its runs and artifact store too, unless --runs-dir or "
                     "--store name others)"},
    "--store": {"help": "artifact store folder (default: <home>/artifact-store)"},
    "--runs-dir": {"help": "folder for per-invocation work and write roots (default: "
                   "<home>/runs)"},
    "--policy": {"help": "policy file (.json, .yaml): Policy keys"},
    "--root": {"action": "append", "metavar": "NAME=PATH",
               "help": "map a logical root name to a folder"},
    "--grant": {"action": "append", "metavar": "KIND=NAME",
                "help": "allow a grant: network, credentials, paid_providers, subprocess "
                "('*' for all declared) or publish=true"},
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="murmur-nb",
        description="List, describe and invoke modproto v1 modules (JSON on standard output). "
        "The options before the subcommand may also follow it.",
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
    invoke.add_argument("--input-file", help="read the input JSON from a file, or - for stdin")
    invoke.add_argument("--approve", action="store_true", help="operator approval for this call")
    invoke.add_argument("--deadline-ms", type=int)
    invoke.add_argument("--max-output-bytes", type=int)
    invoke.add_argument("--extra", help="extra root-level request fields, as a JSON object")
    _add_place_options(invoke, late=True)
    _add_check_parser(sub)
    add_check_hook_parser(sub)
    return parser


@contextlib.contextmanager
def _facet_home(args: argparse.Namespace) -> Iterator[Path]:
    """The facet-studio home of this command: ``--home``, the default, or, for
    ``--module-dir``, a temporary one linking to that folder (removed afterwards)."""
    if not args.module_dir:
        yield Path(args.home) if args.home else facet_studio_home()
        return
    folder = Path(args.module_dir).expanduser().resolve()
    home = Path(tempfile.mkdtemp(prefix="murmur-nb-module-dir-"))
    try:
        (home / "modules").mkdir()
        (home / "modules" / folder.name).symlink_to(folder, target_is_directory=True)
        yield home
    finally:
        remove_tree(home)


def _usage_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with where the command looks for modules, or ``None``."""
    if args.module_dir and args.home:
        return "give --home (an installed module) or --module-dir (a folder), not both"
    if args.module_dir and not (Path(args.module_dir).expanduser() / "module").is_file():
        return (f"--module-dir {args.module_dir}: not a module folder (no executable file "
                "'module' in it)")  # fmt: skip
    return None


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
    with _facet_home(args) as home:
        return _run_host_command(args, policy, home)


def _run_host_command(args: argparse.Namespace, policy: Policy, home: Path) -> int:
    """``list``, ``describe`` or ``invoke`` against ``home``: one JSON document out."""
    runs = Path(args.runs_dir) if args.runs_dir else home / "runs"
    output: Any
    status = 0
    with ModuleHost(home=home, policy=policy, artifact_store=args.store, runs_dir=runs) as host:
        try:
            if args.command == "list":
                output, status = _list(host)
            elif args.command == "describe":
                output = host.describe(args.module).model_dump(mode="json")
            else:
                try:
                    value = _read_input(args)
                    extra = _read_extra(args)
                except SystemExit as exc:
                    print(exc, file=sys.stderr)
                    return 2
                inv = host.invoke(
                    args.capability,
                    value,
                    approve=args.approve,
                    deadline_ms=args.deadline_ms,
                    max_output_bytes=args.max_output_bytes,
                    extra=extra,
                )
                output = _invocation(inv)
                status = 0 if inv.ok else 1
        except InvalidDescriptor as exc:
            output, status = _host_error(exc), 1 if args.command == "describe" else 3
        except ApprovalRequired as exc:
            output, status = _host_error(exc), 3
            output["host_error"]["message"] = exc.message.replace(
                APPROVE_IN_PYTHON,
                f"Approve it with --approve (this call) or --allow {args.capability} (pinned "
                "to its current descriptor)",
            )
        except ModuleHostError as exc:
            output, status = _host_error(exc), 3
        except KeyboardInterrupt:
            print("murmur-nb: interrupted; the module's process tree was killed", file=sys.stderr)
            return 130
    write_out(json.dumps(output, indent=2, ensure_ascii=False) + "\n")
    return status


if __name__ == "__main__":  # pragma: no cover - python -m murmur_nb._checker.cli
    sys.exit(main())
