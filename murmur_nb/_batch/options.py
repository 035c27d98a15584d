"""What ``map`` was asked to do, checked before anything runs; and the journal key's share of it.

Two kinds of options, refused differently:

* the batch's own numbers (``concurrency``, ``retries``, ``backoff``, ``max_cost``,
  ``estimated_cost``, ``poll_every``, ``poll_timeout``, ``artifact_bytes``): a ``ValueError``
  naming the argument, as any Python call refuses a bad argument (:func:`batch_numbers`). A
  NaN budget compared false with every cost and turned the cap off, a negative one let the
  first row overspend it, and ``concurrency=2.5`` failed in a thread pool;
* each row's run options (``deadline_ms``, ``max_output_bytes``, ``extra``), checked by
  ``invoke``'s own rules (:func:`murmur_nb._modules.request.check_bounds` within the policy's
  limits, ``extra`` a dict of strict JSON): one that no row could run with refuses the batch
  as :class:`~murmur_nb.InvalidInput` (:func:`run_options`), where every row had been a failed
  ``invalid_input`` row, journaled, and read back by the next run with better options.

The run options change a row's outcome (a tag in ``extra``, a deadline that cuts a row
short), so they are part of the journal key (:func:`run_key`): a batch run with other
options reuses none of the rows, as a changed module reuses none. A batch with none keys its
rows by the module digest alone, as journals written before did.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from murmur_nb._batch.inputs import canonical, input_key
from murmur_nb._batch.local import RUN_OPTIONS
from murmur_nb._exceptions import InvalidInput
from murmur_nb._modules.request import check_bounds, strict_json

if TYPE_CHECKING:
    from murmur_nb._modules.policy import Policy

__all__ = ["BatchNumbers", "batch_numbers", "run_key", "run_options"]


@dataclass(frozen=True)
class BatchNumbers:
    """The batch's own numbers, checked (``None``: not given)."""

    concurrency: int | None
    retries: int
    backoff: float
    max_cost: float | None
    estimated_cost: float | None
    poll_every: float
    poll_timeout: float
    artifact_bytes: int


def _whole(name: str, value: Any, least: int, meaning: str) -> int:
    """``value`` as an int of at least ``least`` (numpy's integers too), else a ValueError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        raise ValueError(f"{name} must be a whole number, {least} or more ({meaning}), "
                         f"got {value!r}")  # fmt: skip
    return int(value)


def _real(value: Any) -> float | None:
    """``value`` as a float when it is a real number (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    return float(value)


def _amount(name: str, value: Any, meaning: str) -> float | None:
    """A finite number, 0 or more, or ``None``; else a ValueError naming ``name``."""
    if value is None:
        return None
    number = _real(value)
    if number is None or not math.isfinite(number) or number < 0:
        raise ValueError(f"{name} must be a finite number, 0 or more ({meaning}), got "
                         f"{value!r}")  # fmt: skip
    return number


def _seconds(name: str, value: Any, *, positive: bool, finite: bool, meaning: str) -> float:
    number = _real(value)
    if (number is None or math.isnan(number) or number < 0 or (positive and number == 0)
            or (finite and math.isinf(number))):  # fmt: skip
        least = "more than 0" if positive else "0 or more"
        kind = "a finite number of seconds" if finite else "a number of seconds"
        raise ValueError(f"{name} must be {kind}, {least} ({meaning}), got {value!r}")
    return number


def batch_numbers(
    *, concurrency: Any, retries: Any, backoff: Any, max_cost: Any, estimated_cost: Any,
    poll_every: Any, poll_timeout: Any, artifact_bytes: Any,
) -> BatchNumbers:  # fmt: skip
    """The batch's numbers as given to ``map``, checked; a ``ValueError`` names the first bad
    one and what it means."""
    if _real(backoff) is None or not backoff >= 0:  # NaN too
        raise ValueError(f"backoff must be 0 or more seconds, got {backoff!r}")
    return BatchNumbers(
        concurrency=None if concurrency is None else _whole(
            "concurrency", concurrency, 1, "rows run at once; None for the default"),
        retries=_whole("retries", retries, 0, "the attempts a failed row gets after its first"),
        backoff=float(backoff),
        max_cost=_amount("max_cost", max_cost, "the most the batch may spend; None for no cap"),
        estimated_cost=_amount("estimated_cost", estimated_cost,
                               "one row's cost; None when unknown"),
        poll_every=_seconds("poll_every", poll_every, positive=False, finite=True,
                            meaning="between polls of a long-running row's job"),
        poll_timeout=_seconds("poll_timeout", poll_timeout, positive=True, finite=False,
                              meaning="how long a long-running row may poll"),
        artifact_bytes=_whole("artifact_bytes", artifact_bytes, 0,
                              "on a cluster, the largest artifact brought back"),
    )  # fmt: skip


def run_options(
    policy: Policy, capability: str, *, deadline_ms: Any, max_output_bytes: Any, extra: Any
) -> dict[str, Any]:
    """Each row's run options as ``map`` was given them, checked with ``invoke``'s rules
    (``None``: the policy's own bound, no extra fields); :class:`InvalidInput` for one that
    no row could run with, naming it."""
    limits = {"deadline_ms": policy.deadline_ms_limit,
              "max_output_bytes": policy.max_output_bytes_limit}  # fmt: skip
    for name, value in (("deadline_ms", deadline_ms), ("max_output_bytes", max_output_bytes)):
        if value is None:
            continue
        try:
            check_bounds({name: value}, limits)
        except InvalidInput:
            raise InvalidInput(
                f"map() was given {name}={value!r}: {name} must be a positive integer, at "
                f"most this host's bound of {limits[name]} (Policy.{name}_limit), and nothing "
                f"was run. Pass one, or leave {name}=None for the policy's own "
                f"(Policy.{name})"
            ) from None
    if extra is not None and not isinstance(extra, dict):
        raise InvalidInput(
            f"map() was given extra={extra!r}: extra for {capability} must be a dict of "
            f"root-level request fields, not {type(extra).__name__}; nothing was run"
        )
    if extra:
        try:
            strict_json(dict(extra), "extra", capability)
        except InvalidInput as exc:
            raise InvalidInput(f"map(): {exc.message}") from None
    return {"deadline_ms": deadline_ms, "max_output_bytes": max_output_bytes, "extra": extra}


def run_key(module_digest: str, options: Mapping[str, Any]) -> str:
    """The journal key's digest for rows of ``module_digest`` run with ``options``: the
    module digest alone when no run option was given (an empty ``extra`` is none, as for
    ``invoke``), else with the SHA-256 of the options' canonical JSON.

    Examples
    --------
    >>> run_key("sha256:ab", {"deadline_ms": None, "extra": {}})
    'sha256:ab'
    >>> run_key("sha256:ab", {"extra": {"tag": "A"}})[:28]
    'sha256:ab options:sha256:819'
    """
    given = {k: options[k] for k in RUN_OPTIONS if options.get(k) not in (None, {})}
    if not given:
        return module_digest
    # checked as strict JSON already (run_options): its canonical text never fails here
    return f"{module_digest} options:sha256:{input_key(canonical(given))}"
