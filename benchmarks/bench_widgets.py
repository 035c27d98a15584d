"""Benchmark a ModuleBrowser Run click in JupyterLab against the plain ``host.invoke``.

JupyterLab runs (a real server on loopback, Debian's Chromium through Playwright: the
harness of ``tests/_jupyter.py``) a notebook that opens a ``ModuleBrowser`` on the demo home,
then calls ``host.invoke("gallery.thumbs", value)`` N times in that kernel, ``value`` being
what the form sends. The page then opens the capability's form and clicks its Run button N
times, each time measuring from the click to the new row of the browser's history (the
result in the page). Issue 40's goal: the click adds at most 300 ms to ``invoke``.

Usage: ``python benchmarks/bench_widgets.py [N]`` (N = 10).
Last line: ``click_to_result_ms=<median> invoke_ms=<median>``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))

from _jupyter import LabPage, lab_in_chromium, lab_root, run_in_lab, write_notebook  # noqa: E402
from test_browser_module_browser import CELLS, CLICK_TO_ROW_JS  # noqa: E402

import murmur_nb as mnb  # noqa: E402

CAPABILITY = "gallery.thumbs"
WAIT_MS = 180_000
BROWSER = 1


def _notebook(path: Path, n: int) -> None:
    timing = (
        "import time\n"
        "from murmur_nb.widgets import CapabilityForm\n"
        f"value = CapabilityForm(host, {CAPABILITY!r}).form.value()  # what the form sends\n"
        "took = []\n"
        f"for _ in range({n}):\n"
        "    t0 = time.perf_counter()\n"
        f"    host.invoke({CAPABILITY!r}, value)\n"
        "    took.append((time.perf_counter() - t0) * 1000)\n"
        'print("INVOKE_MS", " ".join(f"{t:.1f}" for t in took))'
    )
    write_notebook(path, (*CELLS, timing))


def main(n: int) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory(prefix="bench-widgets-") as tmp:
        tmp_path = Path(tmp)
        demo = mnb.prepare_demo_home(tmp_path / "demo")
        env, root = lab_root(tmp_path, demo.path)
        _notebook(root / "bench.ipynb", n)
        with lab_in_chromium(root, env, tmp_path) as (url, ctx):
            page, problems = run_in_lab(ctx, url("bench.ipynb"))
            page.set_viewport_size({"width": 1280, "height": 2000})
            printed = page.locator(".jp-Notebook .jp-CodeCell").nth(2).locator(
                ".jp-OutputArea-output:has-text('INVOKE_MS')")  # fmt: skip
            printed.wait_for(timeout=WAIT_MS)
            invoke_ms = [float(x) for x in printed.inner_text().split("INVOKE_MS", 1)[1].split()]
            browser = LabPage(page).out(BROWSER)
            browser.locator(f"button.murmur-cap:text-is('{CAPABILITY}')").first.click()
            browser.locator(".murmur-form-box button:has-text('Run')").first.wait_for(
                state="visible", timeout=WAIT_MS)  # fmt: skip
            page.wait_for_timeout(500)
            click_ms = [browser.evaluate(CLICK_TO_ROW_JS) for _ in range(n)]
            ok = browser.locator(".murmur-history-row[data-status='ok']").count()
        if ok != n or problems:
            raise SystemExit(f"{ok} of {n} runs reached the history as ok; page errors: {problems}")
    return click_ms, invoke_ms


if __name__ == "__main__":
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    click_ms, invoke_ms = main(runs)
    click, invoke = statistics.median(click_ms), statistics.median(invoke_ms)
    print("invoke ms:", " ".join(f"{t:.0f}" for t in invoke_ms))
    print("click -> history row ms:", " ".join(f"{t:.0f}" for t in click_ms))
    print(f"click adds {click - invoke:.0f} ms to invoke (goal: at most 300); "
          f"ratio {click / invoke:.2f}")  # fmt: skip
    print(f"click_to_result_ms={click:.0f} invoke_ms={invoke:.0f}")
