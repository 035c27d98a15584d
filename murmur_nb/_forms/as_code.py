"""A run as the Python call that makes it again ("copy as code").

MCP Inspector copies a request, a browser copies a request as cURL; a widget here offers
the ``host.invoke(...)`` (or ``host.map(...)``) call that sends the same input. The input is
written as a Python literal of its JSON form (``pprint.pformat`` of ``json.loads(json.dumps
(input))``): what the module received, so tuples read as lists and keys as strings, and the
call round-trips. The host rejects NaN and infinities (``allow_nan=False``), so every number
has a literal. Nothing here runs anything or imports a user-interface library.

>>> print(invoke_code("gallery.thumbs", {"count": 2, "palette": "mono"}))
host.invoke('gallery.thumbs', {'count': 2, 'palette': 'mono'})
>>> print(map_code("docs.report", [{}, {"title": "B"}], host="h"))
h.map('docs.report', [{}, {'title': 'B'}])
"""

from __future__ import annotations

import json
import keyword
import pprint
import textwrap
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["invoke_code", "map_code", "python_literal"]

#: Lines are kept to this width where the input allows (ruff's and black's default).
WIDTH = 88


def python_literal(value: Any, *, width: int = WIDTH) -> str:
    """``value``'s JSON form as a Python literal that evaluates back to it.

    Raises ``TypeError`` or ``ValueError`` (as :func:`json.dumps` does) for a value the host
    could not send either: one that is not JSON, or a NaN or infinity.
    """
    plain = json.loads(json.dumps(value, allow_nan=False))
    return pprint.pformat(plain, width=width, sort_dicts=False)


def _check_name(host: str) -> str:
    if not host.isidentifier() or keyword.iskeyword(host):
        raise ValueError(f"host name {host!r} is not a Python identifier: name the host's variable")
    return host


def _call(head: str, args: list[str]) -> str:
    """``head(arg, arg)`` on one line when it fits, else one argument per indented line."""
    line = f"{head}({', '.join(args)})"
    if len(line) <= WIDTH and "\n" not in line:
        return line
    body = "".join(textwrap.indent(arg, "    ") + ",\n" for arg in args)
    return f"{head}(\n{body})"


def _code(head: str, fixed: list[str], value: Any, rest: list[str]) -> str:
    """The call on one line when it fits, else the value wrapped to fit its indent."""
    one_line = _call(head, [*fixed, python_literal(value, width=10**6), *rest])
    if "\n" not in one_line:
        return one_line
    return _call(head, [*fixed, python_literal(value, width=WIDTH - 4), *rest])


def invoke_code(
    capability: str,
    input: Any,
    *,
    host: str = "host",
    staged: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> str:
    """The ``host.invoke(capability, input)`` call that sends ``input`` again.

    ``host`` is the variable holding the :class:`~murmur_nb.ModuleHost`; ``staged`` the
    expression for the staged artifacts the input names (``staged=<it>`` is added), if any;
    ``options`` keyword arguments to repeat (JSON-compatible values, such as
    ``deadline_ms``).
    """
    rest = [f"staged={staged}"] if staged else []
    return _code(f"{_check_name(host)}.invoke", [repr(capability)], input,
                 [*rest, *_keywords(options)])  # fmt: skip


def _keywords(options: Mapping[str, Any] | None) -> list[str]:
    return [f"{_check_name(k)}={python_literal(v)}" for k, v in (options or {}).items()]


def map_code(
    capability: str,
    inputs: Iterable[Any],
    *,
    host: str = "host",
    options: Mapping[str, Any] | None = None,
) -> str:
    """The ``host.map(capability, [inputs])`` call that runs the same batch again.

    ``options`` are keyword arguments of :meth:`~murmur_nb.ModuleHost.map` to repeat
    (JSON-compatible values only, such as ``concurrency`` or ``retries``).
    """
    return _code(f"{_check_name(host)}.map", [repr(capability)], list(inputs),
                 _keywords(options))  # fmt: skip
