"""Host overhead of ``ModuleHost.invoke`` and artifact verification throughput.

Run: ``python benchmarks/bench_invoke.py [--runs N] [--mib M]``

1. *Invoke overhead.* The same module is run with the same request, interleaved, as a bare
   ``subprocess.run`` (empty environment, request on stdin, output captured) and through
   ``host.invoke`` (descriptor lookup, input validation, request building, roots, the bounded
   runner with tree tracking, every envelope rule, audit). The module is a ``/bin/sh``
   script so that process start-up noise does not drown the difference; a Python module is
   measured too, for reference. Overhead = median(host) - median(bare), measured
   ``--repeat`` (5) times; the figure is the median of those. Goal: <= 3 ms as root.
   Each call's sandbox is forked by the kernel's zygote (:mod:`murmur_nb._sandbox.zygote`):
   the "made per call" line is the same path again with a fresh host, the "bwrap per call"
   line each call making a bubblewrap of its own (``MURMUR_NB_ZYGOTE=off``, the way before
   the zygote; and where there is none, a call after the first two of the same plan runs in
   a sandbox bubblewrap made ahead, :mod:`murmur_nb._sandbox.warm`).
   The host runs with its default policy, ``sandbox="required"`` (bubblewrap, with the
   seccomp socket filter keeping the module offline); the same comparison is then made for
   each mechanism alone -- no sandbox (``"off"``: the host's own bookkeeping), Landlock
   alone, the seccomp filter alone (loaded by the child, so both use ``fork`` rather than
   ``vfork``), bubblewrap alone (offline through a network namespace instead of the filter) --
   so each one's cost is the difference to the ``"off"`` line, and the filter's saving is
   the difference between the bubblewrap lines. The last line is the path a default Docker
   container gets (Landlock, seccomp and the subreaper helper, every guarantee required),
   beside bubblewrap's.
2. *Verification throughput.* A 256 MiB artifact is re-validated by the host (confinement,
   ``lstat``/``fstat``, size, streamed SHA-256) and hashed by plain ``hashlib.sha256`` over
   the same file, best of several interleaved rounds. Ratio = plain time / verify time.
   Goal: >= 0.5.

3. *Network grant.* The same module, declaring the network, invoked interleaved by a host
   that grants it (each socket call then checked by the host: :mod:`murmur_nb._sandbox.
   netguard`) and by one that does not. Extra = the difference of the medians. Goal: < 5 ms.

The last line is ``overhead_ms=<x> (median of 5) bare_spawn_ms=<b> bwrap_alone_ms=<w>
per_call_ms=<c> bwrap_per_call_ms=<p> prepared_ms=<x> verify_ratio=<y>
network_extra_ms=<z>``: the overhead, the bare spawn it is measured against, and the
overheads of bubblewrap alone, of the default path with a fresh host, of each sandbox made
by a bubblewrap of its own, and of the prepared path (the overhead itself).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import murmur_nb as mnb
from murmur_nb._files.artifacts import verify_artifact
from murmur_nb._sandbox.zygote import SWITCH as ZYGOTE_SWITCH
from murmur_nb.protocol import Artifact, Root

_EXECUTION = (
    '{"local":true,"network":false,"external_writes":false,"provider":"",'
    '"estimated_cost":0,"actual_cost":0,"artifacts":[]}'
)
_SCHEMAS = (
    '"request_schemas":{"in":{"type":"object","properties":{"count":{"type":"integer"}}}},'
    '"result_schemas":{"out":{}},"artifact_schemas":{}'
)


def _descriptor(module: str, network: str = "") -> str:
    cap = (
        f'{{"id":"{module}.run","title":"Run","summary":"s","request_schema":"in",'
        '"result_schema":"out","artifact_schemas":[],"effects":{"local":true,"network":false,'
        '"external_writes":false,"provider":"","cost_known":true},"skills":[],'
        '"long_running":false}'
    )
    return (
        f'{{"module":"{module}","name":"Bench","version":"1","protocol_versions":["modproto.v1"],'
        f'"capabilities":[{cap}],{_SCHEMAS},"agent_overlays":[],"skills":[],'
        f'"permissions":{{"filesystem_read":[],"filesystem_write":[],"network":[{network}],'
        '"credentials":[],"paid_providers":[],"publish":false,"subprocess":[]},'
        '"requirements":[]}'
    )


def _envelope(module: str, operation: str, rid: str, result: str) -> str:
    return (
        f'{{"protocol":"modproto.v1","module":"{module}","operation":"{operation}",'
        f'"request_id":"{rid}","ok":true,"result":{result},"warnings":[],'
        f'"execution":{_EXECUTION}}}'
    )


def _install_sh(home: Path, module: str, network: str = "") -> Path:
    sh = home / "modules" / module
    sh.mkdir(parents=True)
    describe = _envelope(module, "describe", "", _descriptor(module, network))
    invoke = _envelope(module, "invoke", "%s", '{"n":1}')
    (sh / "module").write_text(
        "#!/bin/sh\n"
        f"if [ \"$1\" = describe ]; then printf '%s' '{describe}'; exit 0; fi\n"
        "IFS= read -r line\n"
        'rid=${line#*\\"request_id\\":\\"}\n'
        'rid=${rid%%\\"*}\n'
        f"printf '{invoke}' \"$rid\"\n"
    )
    return sh


def _install(home: Path) -> None:
    sh = _install_sh(home, "benchsh")
    net = _install_sh(home, "benchnet", network='"*"')
    py = home / "modules" / "benchpy"
    py.mkdir(parents=True)
    py_describe = _envelope("benchpy", "describe", "", _descriptor("benchpy"))
    py_invoke = _envelope("benchpy", "invoke", "%s", '{"n":1}')
    (py / "module").write_text(
        f"#!{sys.executable} -S\n"
        "import json, sys\n"
        "if sys.argv[1] == 'describe':\n"
        f"    sys.stdout.write({py_describe!r})\n"
        "else:\n"
        "    req = json.loads(sys.stdin.buffer.read())\n"
        f"    sys.stdout.write({py_invoke!r} % req['request_id'])\n"
    )
    for folder in (sh, net, py):
        (folder / "module").chmod(0o755)


def bench_overhead(
    host: mnb.ModuleHost, module: str, runs: int
) -> tuple[float, float, float, float]:
    """Medians of bare and hosted runs, their difference, and the difference of the minima."""
    cap = f"{module}.run"
    exe = str(host.modules_dir / module / "module")
    warm = host.invoke(cap, {"count": 4})
    assert warm.ok, warm
    payload = json.dumps(
        warm.request.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=False
    ).encode()
    bare: list[float] = []
    hosted: list[float] = []
    with tempfile.TemporaryDirectory() as cwd:
        for _ in range(5):
            subprocess.run([exe, "invoke"], input=payload, capture_output=True, env={}, cwd=cwd,
                           check=True)
        for _ in range(runs):
            t = time.perf_counter()
            proc = subprocess.run([exe, "invoke"], input=payload, capture_output=True, env={},
                                  cwd=cwd, check=True)
            bare.append(time.perf_counter() - t)
            assert proc.stdout
            t = time.perf_counter()
            inv = host.invoke(cap, {"count": 4})
            hosted.append(time.perf_counter() - t)
            assert inv.ok
    b = statistics.median(bare) * 1000
    h = statistics.median(hosted) * 1000
    return b, h, h - b, (min(hosted) - min(bare)) * 1000


def bench_network(home: Path, store: Path, runs: int) -> float:
    """The same /bin/sh module, which declares the network, run interleaved by a host that
    grants it (every socket call checked by the host: the filter, its listener and the
    starting thread) and by one that does not (the socket filter alone)."""
    timed: dict[str, list[float]] = {"granted": [], "ungranted": []}
    with mnb.ModuleHost(home=home, policy=mnb.Policy(network=["*"]), artifact_store=store) as on, \
            mnb.ModuleHost(home=home, artifact_store=store) as off:
        for host in (on, off):
            for _ in range(5):
                assert host.invoke("benchnet.run", {"count": 1}).ok
        for _ in range(runs):
            for name, host in (("granted", on), ("ungranted", off)):
                t = time.perf_counter()
                inv = host.invoke("benchnet.run", {"count": 1})
                timed[name].append(time.perf_counter() - t)
                assert inv.ok
        print(f"  network grant:     {on.sandbox.granted_network}")
    granted, ungranted = (statistics.median(timed[k]) * 1000 for k in ("granted", "ungranted"))
    print(f"invoke with a network grant: {granted:.3f} ms, without: {ungranted:.3f} ms, "
          f"extra {granted - ungranted:.3f} ms (medians of {runs} interleaved; goal < 5 ms)")
    return granted - ungranted


def bench_verify(folder: Path, mib: int, rounds: int) -> tuple[float, float, float]:
    path = folder / "big.bin"
    block = os.urandom(1 << 20)
    digest = hashlib.sha256()
    with path.open("wb") as fh:
        for i in range(mib):
            chunk = block[i % 997 :] + block[: i % 997]
            fh.write(chunk)
            digest.update(chunk)
    size = path.stat().st_size
    art = Artifact(id="big", kind="blob", path="big.bin", root="out",
                   media_type="application/octet-stream", bytes=size,
                   digest="sha256:" + digest.hexdigest())
    roots = {"out": Root(path=str(folder), mode="rw")}

    def plain() -> str:
        h = hashlib.sha256()
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        return h.hexdigest()

    plain()  # warm the page cache
    t_plain: list[float] = []
    t_verify: list[float] = []
    for _ in range(rounds):
        t = time.perf_counter()
        plain()
        t_plain.append(time.perf_counter() - t)
        t = time.perf_counter()
        verified = verify_artifact(art, roots)
        t_verify.append(time.perf_counter() - t)
        assert verified.file == path.resolve()
    best_plain, best_verify = min(t_plain), min(t_verify)
    mb = size / 1e6
    return mb / best_plain, mb / best_verify, best_plain / best_verify


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="invocations per side")
    parser.add_argument("--mib", type=int, default=256, help="artifact size in MiB")
    parser.add_argument("--rounds", type=int, default=5, help="verification rounds")
    parser.add_argument("--repeat", type=int, default=5, help="overhead measurements")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-invoke-") as tmp:
        home = Path(tmp) / "home"
        _install(home)
        with mnb.ModuleHost(home=home, artifact_store=Path(tmp) / "store") as host:
            print(f"sandbox: {host.sandbox.confinement}")
            overheads, bares = [], []
            for repeat in range(args.repeat):
                b, h, o, floor = bench_overhead(host, "benchsh", args.runs)
                overheads.append(o)
                bares.append(b)
                print(f"invoke /bin/sh module ({repeat + 1}/{args.repeat}): bare "
                      f"subprocess.run median {b:.3f} ms, host.invoke median {h:.3f} ms, "
                      f"overhead {o:.3f} ms (of the minima: {floor:.3f} ms; {args.runs} runs "
                      "each, interleaved; sandbox required)")
            overhead, bare = statistics.median(overheads), statistics.median(bares)
            pb, ph, po, _ = bench_overhead(host, "benchpy", max(20, args.runs // 5))
            print(f"invoke Python module:  bare subprocess.run median {pb:.3f} ms, "
                  f"host.invoke median {ph:.3f} ms, overhead {po:.3f} ms (reference)")
        lines: dict[str, float] = {}
        for label, policy in (
            ("no sandbox (off)", mnb.Policy(sandbox="off")),
            ("landlock alone", mnb.Policy(sandbox="best-effort", sandbox_mechanisms=["landlock"])),
            ("seccomp alone", mnb.Policy(sandbox="best-effort", sandbox_mechanisms=["seccomp"])),
            ("bwrap alone", mnb.Policy(sandbox="best-effort", sandbox_mechanisms=["bwrap"])),
            ("bwrap + seccomp", mnb.Policy(sandbox="required")),
            # the same, each call's sandbox made when the call comes (none made ahead): forked
            # by the kernel's zygote, and by a bwrap of its own (MURMUR_NB_ZYGOTE=off)
            ("  made per call", mnb.Policy(sandbox="required")),
            ("  bwrap per call", mnb.Policy(sandbox="required")),
            # where namespaces are refused (a default Docker container): no bwrap
            ("subreaper path", mnb.Policy(sandbox="required",
                                          sandbox_mechanisms=["landlock", "seccomp", "reaper"])),
        ):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", mnb.SandboxWarning)
                with mnb.ModuleHost(home=home, policy=policy,
                                    artifact_store=Path(tmp) / "store") as other:
                    if "per call" in label:
                        other._gate.warm.close()  # nothing is made ahead
                    if label == "  bwrap per call":
                        os.environ[ZYGOTE_SWITCH] = "off"
                    try:
                        mb, mh, mo, mf = bench_overhead(other, "benchsh", max(20, args.runs // 2))
                    finally:
                        os.environ.pop(ZYGOTE_SWITCH, None)
            lines[label.strip()] = mo
            print(f"  {label:<17} /bin/sh module: bare {mb:.3f} ms, host.invoke {mh:.3f} ms, "
                  f"overhead {mo:.3f} ms (of the minima: {mf:.3f} ms)")
        extra = bench_network(home, Path(tmp) / "store", max(20, args.runs // 2))
        data = Path(tmp) / "data"
        data.mkdir()
        plain_mbs, verify_mbs, ratio = bench_verify(data, args.mib, args.rounds)
        print(f"verify {args.mib} MiB artifact: hashlib.sha256 {plain_mbs:.0f} MB/s, "
              f"host verification {verify_mbs:.0f} MB/s, ratio {ratio:.3f} "
              f"(best of {args.rounds})")
    print(f"overhead_ms={overhead:.3f} (median of {args.repeat}) bare_spawn_ms={bare:.3f} "
          f"bwrap_alone_ms={lines['bwrap alone']:.3f} per_call_ms={lines['made per call']:.3f} "
          f"bwrap_per_call_ms={lines['bwrap per call']:.3f} "
          f"prepared_ms={overhead:.3f} verify_ratio={ratio:.3f} network_extra_ms={extra:.3f}")


if __name__ == "__main__":
    main()
