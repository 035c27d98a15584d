"""``murmur-nb``: list, describe, invoke and check modproto modules from a shell.

Everything ``list``, ``describe`` and ``invoke`` print on standard output is one JSON
document, so the command composes with ``jq``; ``check`` and ``check-hook`` print a text
report (``--json`` for JSON, see :mod:`.check_cli` and :mod:`.hook_cli`). Exit status: 0
success; 1 the module answered ``ok: false``, its descriptor was refused or a check (or a hook
rule) failed; 2 bad usage; 3 the host refused or stopped the call (the JSON carries
``host_error.code``, the stable host code, and its message).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from murmur_nb._checker.check_cli import add_check_parser, run_check
from murmur_nb._checker.hook_cli import add_check_hook_parser, run_check_hook
from murmur_nb._exceptions import (
    ApprovalRequired,
    InvalidDescriptor,
    ModuleHostError,
    ProtocolViolation,
)
from murmur_nb._modules.approval import APPROVE_IN_PYTHON
from murmur_nb._modules.host import ModuleHost
from murmur_nb._modules.invocation import Invocation
from murmur_nb._modules.policy import GRANT_KINDS, Policy
from murmur_nb._rules import facet_studio_home

__all__ = ["main"]


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


def _host_error(exc: ModuleHostError) -> dict[str, Any]:
    err: dict[str, Any] = {"code": exc.code, "message": exc.message}
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="murmur-nb",
        description="List, describe and invoke modproto v1 modules (JSON on standard output).",
    )
    parser.add_argument(
        "--home", help="facet-studio home (default: $FACET_STUDIO_HOME or ~/.facet-studio)"
    )
    parser.add_argument("--store", help="artifact store folder (default: <home>/artifact-store)")
    parser.add_argument(
        "--runs-dir", help="folder for per-invocation work and write roots (default: <home>/runs)"
    )
    parser.add_argument("--policy", help="policy file (.json, .yaml): Policy keys")
    parser.add_argument("--root", action="append", default=[], metavar="NAME=PATH",
                        help="map a logical root name to a folder")
    parser.add_argument("--grant", action="append", default=[], metavar="KIND=NAME",
                        help="allow a grant: network, credentials, paid_providers, subprocess "
                             "('*' for all declared) or publish=true")
    parser.add_argument("--binary", action="append", default=[], metavar="NAME=PATH",
                        help="resolve a subprocess name to an absolute path")
    parser.add_argument("--allow", action="append", default=[], metavar="CAPABILITY",
                        help="pre-approve a capability (pinned to its current descriptor)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every installed module, refused ones with their errors")
    describe = sub.add_parser("describe", help="one module's validated descriptor")
    describe.add_argument("module")
    invoke = sub.add_parser("invoke", help="invoke a capability and print the invocation")
    invoke.add_argument("capability")
    invoke.add_argument("input", nargs="?", help="input as JSON (default: {})")
    invoke.add_argument("--input-file", help="read the input JSON from a file, or - for stdin")
    invoke.add_argument("--approve", action="store_true", help="operator approval for this call")
    invoke.add_argument("--deadline-ms", type=int)
    invoke.add_argument("--max-output-bytes", type=int)
    invoke.add_argument("--extra", help="extra root-level request fields, as a JSON object")
    add_check_parser(sub)
    add_check_hook_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``murmur-nb`` command; return its exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        policy = _load_policy(args)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.command in ("check", "check-hook"):
        return run_check(args, policy) if args.command == "check" else run_check_hook(args)
    home = Path(args.home) if args.home else facet_studio_home()
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
    try:
        json.dump(output, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into `head`
        sys.stderr.close()
    return status


if __name__ == "__main__":  # pragma: no cover - python -m murmur_nb._checker.cli
    sys.exit(main())
