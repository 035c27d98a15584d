"""``binder/`` proved without Docker: what it declares, plus postBuild, runs every tutorial.

repo2docker builds a Binder image from ``binder/``: ``runtime.txt`` picks the Python,
``requirements.txt`` is pip-installed, ``apt.txt`` names Debian packages, and the executable
``postBuild`` runs last. This test does the Python part by hand in a fresh virtual environment
and a fresh ``$HOME`` (so the demo home, the hook build and its caches start empty), then runs
nbval over ``notebooks/`` with a kernel from that environment. The pytest and nbval driving
the kernel come from the test environment; the kernel, murmur-nb, the demo home and every
module the notebooks run come only from what ``binder/`` declares.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parent.parent
BINDER = REPO / "binder"
MEMORY_LIMIT = 2 * 1024**3  # Binder gives a user about 2 GB


def test_binder_declares_python_311_and_an_executable_postbuild() -> None:
    runtime = (BINDER / "runtime.txt").read_text().strip()
    match = re.fullmatch(r"python-3\.(\d+)", runtime)
    assert match and int(match.group(1)) >= 11, runtime
    post_build = BINDER / "postBuild"
    assert post_build.stat().st_mode & stat.S_IXUSR
    assert post_build.read_text().startswith("#!/usr/bin/env bash\n")
    requirements = (BINDER / "requirements.txt").read_text().splitlines()
    names = {re.split(r"[<>=\[ ]", line)[0] for line in requirements if line and line[0] != "#"}
    assert {"ipykernel", "ipywidgets", "matplotlib"} <= names


def _pins() -> dict[str, tuple[str, str]]:
    """binder/constraints.txt: canonical name -> (name as written, pinned version)."""
    pins = {}
    for line in (BINDER / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[canonicalize_name(name)] = (name, version)
    return pins


def test_binder_pins_the_versions_the_demo_was_tested_with() -> None:
    """postBuild installs with ``-c binder/constraints.txt``, which pins (``name==version``,
    from a ``pip freeze``) every requirement of murmur-nb and its render, hooks, check and dask
    extras, inside the range pyproject.toml allows; never murmur-nb itself, an editable
    install, a URL or a package index."""
    post_build = (BINDER / "postBuild").read_text()
    install = re.search(r"^python -m pip install (.*)$", post_build, re.M)
    assert install is not None, post_build
    assert "-c binder/constraints.txt" in install.group(1), install.group(0)
    text = (BINDER / "constraints.txt").read_text()
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert all(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==[0-9][0-9A-Za-z.+!-]*", line)
               for line in lines), lines  # fmt: skip
    assert "://" not in text and "index" not in text.lower()
    pins = _pins()
    assert "murmur-nb" not in pins
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in ("render", "hooks", "check", "dask"):
        wanted += project["optional-dependencies"][extra]
    for raw in wanted:
        requirement = Requirement(raw)
        if requirement.marker is not None and not requirement.marker.evaluate(
            {"sys_platform": "linux", "python_version": "3.11"}
        ):
            continue
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{raw} is not pinned in binder/constraints.txt"
        assert requirement.specifier.contains(pins[name][1], prereleases=True), (raw, pins[name])


def test_postbuild_leaves_no_sealing_key_in_the_image(tmp_path: Path) -> None:
    """The image is shared by every Binder user and anyone can pull it: postBuild removes the
    per-user sealing key (``~/.local/state/murmur-nb/cache.key``) and the compiled hooks sealed
    under it, and keeps the componentize-py build (keyed by digest, not sealed) and the demo
    home. postBuild runs for real in a fresh ``$HOME``, with ``pip install`` recorded rather
    than run (the test environment has murmur-nb already); the key and a sealed entry are
    there before it ends, as a hook loaded during the build would leave them."""
    home = tmp_path / "home"
    state = home / ".local" / "state" / "murmur-nb"
    state.mkdir(parents=True, mode=0o700)
    (state / "cache.key").write_bytes(os.urandom(32))
    (state / "cache.key").chmod(0o600)
    cache = home / ".cache" / "murmur-nb"
    (cache / "components").mkdir(parents=True)
    (cache / "components" / "entry.cwasm").write_bytes(b"sealed machine code")
    built = Path(os.environ.get("MURMUR_NB_CACHE", Path.home() / ".cache" / "murmur-nb"))
    (cache / "builds").mkdir()
    for made in (built / "builds").glob("app-*.wasm"):  # the demo hook built here: 30 s saved
        shutil.copy(made, cache / "builds")
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "python").write_text(
        "#!/bin/sh\n"
        f'if [ "$1 $2" = "-m pip" ]; then echo "$@" > {tmp_path / "pip-args"}; exit 0; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    (shims / "python").chmod(0o755)
    env = {"PATH": f"{shims}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    out = _run([str(BINDER / "postBuild")], env, timeout=600)
    assert "murmur-nb demo home ready: critic, docs, gallery" in out
    assert not (state / "cache.key").exists(), "the sealing key stayed in the image"
    assert not (cache / "components").exists(), "entries sealed under the image's key stayed"
    assert "-c binder/constraints.txt" in (tmp_path / "pip-args").read_text()
    assert list((cache / "builds").glob("app-*.wasm")), "the componentize-py build must stay"
    hook = home / ".murmur-nb-demo" / "murmur" / "hooks" / "summarize.wasm"
    assert hook.read_bytes()[:4] == b"\0asm"


def _run(cmd: list[str], env: dict[str, str], cwd: Path = REPO, timeout: int = 900) -> str:
    done = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{cmd} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_fresh_environment_from_binder_runs_every_tutorial_under_nbval(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    home = tmp_path / "home"
    home.mkdir()
    base = {
        "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        # Reuse downloaded wheels only; what gets installed is still decided by binder/.
        "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    timings: dict[str, float] = {}

    t0 = time.perf_counter()
    _run([sys.executable, "-m", "venv", str(venv)], base)
    _run(["python", "-m", "pip", "install", "--quiet", "-r", str(BINDER / "requirements.txt")],
         base)  # fmt: skip
    timings["requirements"] = time.perf_counter() - t0

    # postBuild, measured: the peak resident size of any process it ran must fit Binder.
    t0 = time.perf_counter()
    probe = (
        "import resource, subprocess, sys\n"
        "code = subprocess.run([sys.argv[1]]).returncode\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)\n"
        "sys.exit(code)\n"
    )
    out = _run(["python", "-c", probe, str(BINDER / "postBuild")], base)
    timings["postBuild"] = time.perf_counter() - t0
    peak = int(out.strip().splitlines()[-1])
    assert peak < MEMORY_LIMIT, f"postBuild peaked at {peak / 2**20:.0f} MiB"
    assert "murmur-nb demo home ready: critic, docs, gallery" in out

    demo = home / ".murmur-nb-demo"
    hook = demo / "murmur" / "hooks" / "summarize.wasm"
    assert hook.read_bytes()[:4] == b"\0asm", "postBuild must build the demo hook"
    assert (demo / "murmur" / "conversations" / "demo-session.jsonl").is_file()
    launcher = (demo / "facet-studio" / "modules" / "gallery" / "module").read_text()
    assert launcher.splitlines()[0].startswith(f"#!{venv}/bin/python"), launcher.splitlines()[0]
    # The package came from this checkout, into the fresh environment.
    where = _run(["python", "-c", "import murmur_nb; print(murmur_nb.__file__)"], base)
    assert where.strip() == str(REPO / "murmur_nb" / "__init__.py")

    # A kernel from the fresh environment; nbval in this process's environment drives it.
    _run(["python", "-m", "ipykernel", "install", "--prefix", str(venv), "--name",
          "murmur-binder"], base)  # fmt: skip
    env = {
        **base,
        "PATH": f"{Path(sys.executable).parent}:{base['PATH']}",
        "JUPYTER_PATH": str(venv / "share" / "jupyter"),
        "MURMUR_NB_DEMO_HOME": str(demo),  # the home postBuild prepared (Binder's default)
    }
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider",
         "--strict-markers", "--nbval", "--nbval-kernel-name", "murmur-binder",
         "--nbval-cell-timeout", "900", "-v", "notebooks"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1500, check=False,
    )  # fmt: skip
    timings["nbval"] = time.perf_counter() - t0
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, f"{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= 80 and "failed" not in summary, summary
    # the one run of the tutorials under nbval (the suite's testpaths leave notebooks/ out):
    # every one of them, each from its first cell; nbval names items like
    # "notebooks/01-tour::ipynb::Cell 0"
    tutorials = sorted(p.stem for p in (REPO / "notebooks").glob("*.ipynb"))
    assert len(tutorials) >= 7, tutorials
    for name in tutorials:
        ran = re.search(rf"{re.escape(name)}\S*::Cell 0 PASSED", done.stdout)
        assert ran, f"{name} did not run"
    print(f"binder: {summary}; peak postBuild RSS {peak / 2**20:.0f} MiB; "
          + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))
