"""Rules on what a caller hands to :meth:`ModuleHost.invoke` before it becomes a request.

An ``extra`` key never shadows a host field, also as a Go module reads it (case-insensitive
under Unicode simple folding: :func:`go_fold` / :func:`shadowing_keys`, defined once in
:mod:`murmur_nb.protocol._fold` and used by the ``Request`` serializer too); such a key is
dropped with a warning. The request is strict UTF-8 JSON (no lone surrogate, no ``NaN``),
refused as ``invalid_input`` before anything runs. ``deadline_ms`` and ``max_output_bytes``
are positive and within the policy's limits. Every root path sent is ``realpath``-ed.
:func:`poll_request` and :func:`poll_finished` are the one home of the poll rule.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from murmur_nb._exceptions import InvalidInput
from murmur_nb._files.beneath import real_path
from murmur_nb.protocol._fold import go_fold, shadowing_keys

__all__ = [
    "FINISHED_STATES",
    "poll_finished",
    "canonical_path",
    "check_bounds",
    "go_fold",
    "poll_request",
    "shadowing_keys",
    "strict_json",
]


def strict_json(value: Any, what: str, capability: str) -> Any:
    """``value`` round-tripped through strict UTF-8 JSON text, or ``invalid_input`` saying why."""
    hint = (
        f"pass {'a dict of ' if what == 'extra' else ''}plain dicts, lists, strings, numbers, "
        "booleans and None; nothing was run"
    )
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(
            f"{what} is not JSON-serializable as strict JSON for {capability} ({exc}); {hint}"
        ) from exc
    except RecursionError as exc:
        raise InvalidInput(f"{what} for {capability} is nested too deeply; {hint}") from exc
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end]
        raise InvalidInput(
            f"{what} is not JSON-serializable as strict UTF-8 JSON for {capability}: it holds "
            f"{bad!r}, a lone surrogate; {hint} (decode bytes with errors='replace' first)"
        ) from exc
    return json.loads(encoded)


def check_bounds(values: Mapping[str, int], limits: Mapping[str, int]) -> None:
    """Each bound positive and at most its limit; otherwise ``invalid_input`` naming it."""
    for name, value in values.items():
        limit = limits[name]
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise InvalidInput(
                f"{name} must be a positive integer, got {value!r}; pass a positive "
                f"{name}= to invoke, or leave it None to use Policy.{name}"
            )
        if value > limit:
            raise InvalidInput(
                f"{name}={value} is above this host's bound of {limit} for {name}; nothing "
                f"was run. Pass at most {limit}, or raise the bound in the Policy"
            )


def canonical_path(path: str | os.PathLike[str]) -> str:
    """The canonical absolute form of ``path`` (links resolved), as roots are sent."""
    return real_path(path)


def poll_request(schema: Any, started: Any) -> dict[str, Any]:
    """A long-running call's poll request: the fields of its result (``started``) that the
    poll capability's request ``schema`` names; ``{}`` when either is not an object."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping) or not isinstance(started, Mapping):
        return {}
    return {name: started[name] for name in props if name in started}


#: result states that end the polling of a long-running call
FINISHED_STATES = frozenset(
    {"done", "finished", "complete", "completed", "failed", "error", "cancelled"}
)


def poll_finished(result: Any) -> bool:
    """Whether a poll result says the job is over: a final ``state``/``status``, or
    ``done >= total`` (integers, ``0 <= done <= total``, ``total > 0``); a result that says
    neither is taken as final, so a poll loop always ends."""
    if not isinstance(result, Mapping):
        return True
    state = result.get("state", result.get("status"))
    if isinstance(state, str):
        return state.lower() in FINISHED_STATES
    done, total = result.get("done"), result.get("total")
    if type(done) is not int or type(total) is not int or total <= 0 or not 0 <= done <= total:
        return True
    return done >= total
