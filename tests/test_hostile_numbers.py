"""A module prints numbers JSON has not: ``NaN``, ``Infinity``, ``1e999``.

Python's ``json`` writes ``NaN`` and the infinities unless told not to, and reads them back;
the runtime's Go decoder refuses the whole document (and ``1e999`` as out of range). The host
refuses them in what it sends (a request's input) but took them in what a module printed:
``invoke`` answered ``ok`` with ``{"x": nan}``, a result the runtime would have refused. Each
is now the ``json`` breach of the envelope rules, naming the token and the fix; a descriptor
holding one is refused. (The module side of this package, ``murmur_nb.protocol``, writes
``null`` for them: pydantic's JSON mode.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _modules import install

import murmur_nb as mnb


@pytest.fixture
def home(facet_home: Path) -> Path:
    install(facet_home, "nonfinite", "nonfinite")
    return facet_home


@pytest.mark.parametrize(
    ("capability", "said"),
    [("nan", "NaN is not JSON"), ("inf", "Infinity is not JSON"),
     ("huge", "a number in it is too large for a 64-bit float")],
)  # fmt: skip
def test_an_envelope_holding_a_number_json_has_not_is_refused(
    home: Path, capability: str, said: str
) -> None:
    with mnb.ModuleHost(home=home) as host, pytest.raises(mnb.ProtocolViolation) as err:
        host.invoke(f"nonfinite.{capability}", {})
    assert err.value.rule == "json", err.value
    assert said in err.value.message and "standard output is not JSON" in err.value.message


def test_a_descriptor_holding_nan_is_refused(home: Path) -> None:
    (home / "modules" / "nonfinite" / "describe_nan").write_text("")
    with mnb.ModuleHost(home=home) as host:
        (info,) = [m for m in host.modules() if m.id == "nonfinite"]
    assert info.descriptor is None and "NaN is not JSON" in str(info.errors), info

