"""What a batch runs on: a DataFrame, a list or an iterable of dicts, as canonical rows.

A DataFrame row is an object, its columns the properties; a missing value (``NaN``, ``None``,
``pd.NA``, ``NaT``) leaves the property out ("not given", so a default or ``required``
decides). numpy scalars become Python numbers, arrays and dicts in a cell JSON values, a
``Timestamp`` ISO 8601 text; column names must be strings. Every row becomes strict JSON with
sorted keys once (:func:`canonical`); its SHA-256 is the journal key. A DataFrame's index
labels the rows of ``Batch.to_pandas()``; other inputs are numbered from 0.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Inputs", "canonical", "input_key", "read_inputs"]


@dataclass
class Inputs:
    """The rows of a batch: their index labels, values and, for a DataFrame, its frame."""

    index: Any  # a pandas Index, or None for "0..n-1"
    values: list[dict[str, Any]]
    columns: list[str]
    frame: Any = None  # the DataFrame given, when one was


def canonical(value: Any) -> str:
    """Strict JSON text of ``value`` with sorted keys and no spaces (the journal's key text)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)  # fmt: skip


def input_key(text: str) -> str:
    """The SHA-256 (hex) of a row's canonical input."""
    return hashlib.sha256(text.encode()).hexdigest()


def _missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    import pandas as pd  # noqa: PLC0415 - pandas only for a DataFrame

    try:
        return bool(pd.isna(value)) if not isinstance(value, list | dict | tuple) else False
    except (TypeError, ValueError):  # an array cell: not missing as a whole
        return False


def _plain(value: Any) -> Any:
    """A cell as plain JSON data (numpy and pandas scalars, arrays, timestamps)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    tolist = getattr(value, "tolist", None)
    if callable(tolist):  # numpy scalar or array
        return _plain(tolist())
    isoformat = getattr(value, "isoformat", None)
    if callable(isoformat):
        return isoformat()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _from_frame(frame: Any) -> Inputs:
    columns = [str(c) for c in frame.columns]
    bad = [c for c in frame.columns if not isinstance(c, str)]
    if bad:
        raise TypeError(f"map() takes a DataFrame whose column names are strings; {bad!r} are not")
    values = []
    for row in frame.itertuples(index=False, name=None):
        values.append(
            {name: _plain(cell) for name, cell in zip(columns, row, strict=True)
             if not _missing(cell)}
        )  # fmt: skip
    return Inputs(frame.index, values, columns, frame)


def read_inputs(inputs: Any) -> Inputs:
    """Turn what ``map`` was given into :class:`Inputs` (each row a dict)."""
    if hasattr(inputs, "itertuples") and hasattr(inputs, "columns"):
        return _from_frame(inputs)
    if isinstance(inputs, Mapping | str | bytes):
        raise TypeError(
            "map() takes a list of input dicts, an iterable of them or a pandas DataFrame, "
            f"not a single {type(inputs).__name__}; for one call use invoke()"
        )
    if not isinstance(inputs, Iterable):
        raise TypeError(f"map() takes an iterable of input dicts, not {type(inputs).__name__}")
    values: list[dict[str, Any]] = []
    columns: dict[str, None] = {}
    for value in inputs:
        plain = {} if value is None else value
        values.append(plain)
        if isinstance(plain, Mapping):
            columns.update(dict.fromkeys(str(k) for k in plain))
    return Inputs(None, values, list(columns))
