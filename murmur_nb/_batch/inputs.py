"""What a batch runs on: a DataFrame, a list or an iterable of dicts, as canonical rows.

A DataFrame row is an object, its columns the properties; a missing value (``NaN``, ``None``,
``pd.NA``, ``NaT``) leaves the property out ("not given", so a default or ``required``
decides). numpy scalars become Python numbers, arrays and dicts in a cell JSON values, a
``Timestamp`` ISO 8601 text, and a whole float in a property the request schema types
``integer`` an integer (an integer column with a missing value is floats in pandas); column
names must be strings, each given once. Every row becomes strict JSON with sorted keys once
(:func:`canonical`); its SHA-256 is the journal key. A DataFrame's index labels the rows of
``Batch.to_pandas()``, and so does a Series of dicts' (each dict an input); other inputs are
numbered from 0. A Series of anything else is a column, not inputs: refused with how to make
it a DataFrame (``s.to_frame()``), where each of its values had been an ``invalid_input`` row.

Hostile cells are refused as that row's ``invalid_input``, naming the column, never by a
crash of the whole ``map``: nesting deeper than :data:`MAX_INPUT_DEPTH` (the input object is
level 1; the limit modules' own JSON has, :data:`~murmur_nb._schemas.nesting.MAX_JSON_DEPTH`),
measured while converting, so a 5,000-deep cell never reaches a recursive encoder; and two
keys of one dict that JSON would write as the same text (``1`` and ``"1"``, ``True`` and
``"true"``), which would otherwise merge silently; and a number JSON cannot carry (``inf``,
and in a list's dicts ``NaN``; a DataFrame's ``NaN`` is a missing value), named with the fix
(the JSON encoder's own words, "Out of range float values are not JSON compliant", named
neither). A DataFrame with a column name twice is refused before anything runs, for the same
reason as colliding keys.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from murmur_nb._exceptions import InvalidInput
from murmur_nb._schemas.nesting import MAX_JSON_DEPTH

__all__ = ["MAX_INPUT_DEPTH", "Inputs", "RowProblem", "canonical", "input_key", "read_inputs"]

#: The deepest nesting of arrays and objects in one input, the input object being level 1.
MAX_INPUT_DEPTH = MAX_JSON_DEPTH


class RowProblem(ValueError):
    """One row cannot be sent as it is; the message names the column and the fix."""


#: the largest whole float every integer up to which a float holds exactly (2**53)
_EXACT = 2.0**53


@dataclass
class Inputs:
    """The rows of a batch: their index labels, values and, for a DataFrame, its frame."""

    index: Any  # a pandas Index, or None for "0..n-1"
    values: list[dict[str, Any]]
    columns: list[str]
    frame: Any = None  # the DataFrame given, when one was


def canonical(value: Any, *, cells: bool = False, integers: Collection[str] = ()) -> str:
    """Strict JSON text of ``value`` with sorted keys and no spaces (the journal's key text).

    ``cells``: ``value`` is a DataFrame row, whose cells are converted first (see the module
    notes), and a whole float (``1.0``) in a property named in ``integers`` (the request
    schema's ``integer`` properties) goes as the integer: pandas stores an integer column
    with a missing value as floats, and a module reading ``1.0`` as an int fails (Python's
    ``range(1.0)``, Go's ``int``). Raises :class:`RowProblem` for a row nested too deeply,
    with colliding keys or with a number JSON cannot carry (``inf``, ``NaN``), each naming
    where; ``TypeError`` / ``ValueError`` for one that is not JSON otherwise.
    """
    plain = _plain(value, (), 1, cells)
    if cells and integers and isinstance(plain, dict):
        for name in integers:
            cell = plain.get(name)
            if type(cell) is float and cell.is_integer() and abs(cell) <= _EXACT:
                plain[name] = int(cell)
    return json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
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


def _where(path: tuple[Any, ...], cells: bool) -> str:
    """``column 'extra'`` (with the path inside it, if any) or ``input['extra']``."""
    if not path:
        return "the input"
    inside = "".join(f"[{p!r}]" for p in path[1:])
    if cells:
        return f"column {path[0]!r}" + (f" (at {inside})" if inside else "")
    return f"input[{path[0]!r}]{inside}"


def json_key(key: Any) -> str:
    """The text JSON writes for a dict key (as :func:`json.dumps` does), or ``TypeError``.

    Examples
    --------
    >>> [json_key(k) for k in ("a", 1, 1.5, True, None)]
    ['a', '1', '1.5', 'true', 'null']
    """
    if isinstance(key, str):
        return key
    if key is True or key is False or key is None:
        return {True: "true", False: "false", None: "null"}[key]
    if isinstance(key, int | float):
        return json.dumps(key, allow_nan=False)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _keys(value: Mapping[Any, Any], path: tuple[Any, ...], cells: bool) -> dict[str, Any]:
    """``value``'s items under their JSON keys; a :class:`RowProblem` when two keys collide."""
    out: dict[str, Any] = {}
    given: dict[str, Any] = {}
    for key, item in value.items():
        plain_key = key
        if cells and not isinstance(key, str) and callable(getattr(key, "tolist", None)):
            plain_key = key.tolist()  # a numpy scalar
        try:
            name = json_key(plain_key)
        except TypeError:
            if not cells:
                raise
            name = str(key)
        if name in given:
            raise RowProblem(
                f"{_where(path, cells)} holds a dict whose keys {given[name]!r} and {key!r} "
                f"are both the JSON key {name!r}, so one would silently replace the other; "
                "rename one of them (a JSON object's keys are text)"
            )
        given[name] = key
        out[name] = item
    return out


def _plain(value: Any, path: tuple[Any, ...], depth: int, cells: bool) -> Any:
    """``value`` as plain JSON data, its keys as JSON writes them, at most
    :data:`MAX_INPUT_DEPTH` levels deep (``depth``: the level ``value`` would be at).
    ``cells``: numpy and pandas values, arrays and timestamps converted, NaN as null."""
    if cells and not isinstance(value, Mapping | list | tuple | str):
        value = _cell(value)
    if isinstance(value, Mapping | list | tuple) and depth > MAX_INPUT_DEPTH:
        raise RowProblem(
            f"{_where(path[:1], cells)} nests arrays and objects deeper than "
            f"{MAX_INPUT_DEPTH} levels (the input object is level 1), the host's limit, or "
            "holds itself; flatten it, or hand the data over as a file in a root"
        )
    if isinstance(value, Mapping):
        return {k: _plain(v, (*path, k), depth + 1, cells)
                for k, v in _keys(value, path, cells).items()}  # fmt: skip
    if isinstance(value, list | tuple):
        return [_plain(v, (*path, i), depth + 1, cells) for i, v in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        raise RowProblem(_not_finite(value, path, cells))
    return value


def _not_finite(value: float, path: tuple[Any, ...], cells: bool) -> str:
    """Why ``value`` (``inf``, ``-inf`` or ``NaN``) cannot be sent, naming where it is."""
    if cells:
        return (f"{_where(path, cells)} holds {value!r}, which JSON cannot carry; replace it "
                "(df.replace([np.inf, -np.inf], np.nan) leaves the property out of those "
                "rows) or clip the column to finite numbers")  # fmt: skip
    shown = "NaN" if math.isnan(value) else repr(value)
    return (f"{_where(path, cells)} is {shown}, which JSON cannot carry; leave the key out, "
            "or pass None or a finite number")  # fmt: skip


def _cell(value: Any) -> Any:
    """A numpy or pandas scalar or array, or a timestamp, as plain data (its containers are
    converted by the caller, level by level)."""
    tolist = getattr(value, "tolist", None)
    if callable(tolist):  # a numpy scalar (datetime64 gives a datetime) or array
        value = tolist()
        if isinstance(value, list):
            return value
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
    twice = {c: columns.count(c) for c in dict.fromkeys(columns) if columns.count(c) > 1}
    if twice:
        listed = ", ".join(f"{c!r} ({n} times)" for c, n in twice.items())
        raise InvalidInput(
            f"map() was given a DataFrame with a column name more than once: {listed}. Each "
            "column becomes one property of a row's input, so the copies would silently "
            "replace each other, and nothing was run. Give each column its own name "
            "(df.columns = [...] or df.rename(columns=...)), or drop the copies "
            "(df.loc[:, ~df.columns.duplicated()])"
        )
    values = []
    for row in frame.itertuples(index=False, name=None):
        values.append(
            {name: cell for name, cell in zip(columns, row, strict=True) if not _missing(cell)}
        )
    return Inputs(frame.index, values, columns, frame)


def _from_series(series: Any) -> Inputs:
    """A Series of dicts, on its own index; a Series of other values is refused with how to
    make it the one-column DataFrame it is."""
    values = series.tolist()
    if values and not any(isinstance(v, Mapping) for v in values):
        name = series.name
        how = ("s.to_frame('n'), with the name of the property its values are for 'n' (this "
               "Series has no name for s.to_frame() to take)") if name is None else (
              f"s.to_frame() (its column named {name!r}, after the Series) or "
              "s.to_frame('n') to name the property its values are")  # fmt: skip
        raise TypeError(
            "map() takes a DataFrame (each row an input, its columns the properties) or "
            f"dicts, not a Series of {type(values[0]).__name__} values, each of which would "
            f"be a whole input; pass it as a one-column DataFrame: {how}"
        )
    rows = _from_values(values)
    return Inputs(series.index, rows.values, rows.columns)


def _from_values(inputs: Iterable[Any]) -> Inputs:
    values: list[dict[str, Any]] = []
    columns: dict[str, None] = {}
    for value in inputs:
        plain = {} if value is None else value
        values.append(plain)
        if isinstance(plain, Mapping):
            columns.update(dict.fromkeys(str(k) for k in plain))
    return Inputs(None, values, list(columns))


def read_inputs(inputs: Any) -> Inputs:
    """Turn what ``map`` was given into :class:`Inputs` (each row a dict)."""
    if hasattr(inputs, "itertuples") and hasattr(inputs, "columns"):
        return _from_frame(inputs)
    if hasattr(inputs, "to_frame") and hasattr(inputs, "index"):  # a pandas Series
        return _from_series(inputs)
    if isinstance(inputs, Mapping | str | bytes):
        raise TypeError(
            "map() takes a list of input dicts, an iterable of them or a pandas DataFrame, "
            f"not a single {type(inputs).__name__}; for one call use invoke()"
        )
    if not isinstance(inputs, Iterable):
        raise TypeError(f"map() takes an iterable of input dicts, not {type(inputs).__name__}")
    return _from_values(inputs)
