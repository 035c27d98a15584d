"""The public namespace is exactly ``__all__``, sorted, and importing it stays light."""

import subprocess
import sys

import murmur_nb

HEAVY = ("pandas", "wasmtime", "ipywidgets", "PIL", "pyarrow", "jsonschema")


def test_all_is_sorted_and_unique() -> None:
    assert murmur_nb.__all__ == sorted(murmur_nb.__all__)
    assert len(set(murmur_nb.__all__)) == len(murmur_nb.__all__)


def test_all_matches_public_names() -> None:
    # Only names a user can write as murmur_nb.<name>: pytest's assertion rewriting (it
    # rewrites every module of a plugin's distribution, and murmur-nb ships a pytest plugin)
    # adds '@py_builtins' and '@pytest_ar', which no attribute access can reach.
    public = {
        name
        for name, value in vars(murmur_nb).items()
        if name.isidentifier()
        and not name.startswith("_")
        and getattr(value, "__module__", "murmur_nb").startswith("murmur_nb")
    }
    public -= {"version", "PackageNotFoundError"}
    assert public <= set(murmur_nb.__all__)
    for name in murmur_nb.__all__:
        assert hasattr(murmur_nb, name), name


def test_both_checkers_are_public() -> None:
    for name in ("check_module", "CheckReport", "check_hook", "HookCheckReport",
                 "HookCheckResult"):  # fmt: skip
        assert name in murmur_nb.__all__, name
    assert murmur_nb.check_hook.__module__ == "murmur_nb._checker.hook_check"


def test_import_does_not_load_heavy_packages() -> None:
    code = (
        "import sys, murmur_nb\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_render_error_is_deprecated_but_still_caught() -> None:
    """Nothing raises it any more; making one warns, an ``except RenderError`` still works."""
    import pytest

    with pytest.warns(DeprecationWarning, match="goes in 0.2"):
        err = murmur_nb.RenderError("old code path")
    try:
        raise err
    except murmur_nb.RenderError as caught:
        assert caught.code == "render_failed"
