"""The tour in a real browser: JupyterLab on loopback, Debian Chromium driven by Playwright.

JupyterLab is started with a token on 127.0.0.1, Chromium opens a copy of
``notebooks/01-tour.ipynb``, clears the saved outputs and runs every cell with the kernel, and
the test then asserts by DOM queries (Playwright waits for each selector, nothing sleeps) that
every widget and every rendered artifact of the tour is in the page; one skill is then opened
from the ModuleBrowser's knowledge list, as a person would, and must render. Screenshots are
saved under ``test-artifacts/`` (or ``$MURMUR_NB_TEST_ARTIFACTS``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _jupyter import (
    artifacts_dir,
    jupyter_env,
    lab_in_chromium,
    quiet_lab_settings,
    run_in_lab,
    tour_copy,
)

import murmur_nb as mnb

RUN_TIMEOUT_MS = 600_000
SHOW_TIMEOUT_MS = 60_000


def _all_cells_ran(page: Any) -> None:
    page.wait_for_function(
        """() => {
            const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputPrompt')];
            return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
        }""",
        timeout=RUN_TIMEOUT_MS,
    )


def _loaded_images(page: Any, selector: str) -> int:
    count: int = page.evaluate(
        """sel => [...document.querySelectorAll(sel)]
            .filter(img => img.complete && img.naturalWidth > 0).length""",
        selector,
    )
    return count


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_tour_runs_in_jupyterlab_and_shows_every_widget_and_artifact(tmp_path: Path) -> None:
    demo = mnb.prepare_demo_home(tmp_path / "demo")
    env = jupyter_env(tmp_path, demo.path)
    quiet_lab_settings(env)
    root = tmp_path / "root"
    tour_copy(root)
    with lab_in_chromium(root, env, tmp_path) as (url, ctx):
        page, problems = run_in_lab(ctx, url("01-tour.ipynb"), timeout_ms=SHOW_TIMEOUT_MS)
        _all_cells_ran(page)
        out = ".jp-OutputArea-output"

        def show(selector: str) -> Any:
            return page.wait_for_selector(selector, state="attached", timeout=SHOW_TIMEOUT_MS)

        # ModuleBrowser: badges for effects and setup, the capability picker, the open button.
        show(f"{out} .widget-html .murmur-badge:has-text('Needs setup')")
        show(f"{out} .widget-html .murmur-badge:has-text('cost unknown')")
        show(f"{out} .widget-dropdown select option:has-text('gallery.thumbs')")
        show(f"{out} button:has-text('Open form')")
        # Its knowledge list: choosing a skill loads it through the kernel's host (verified by
        # digest) and renders its Markdown in the page, the digest in the card.
        reviewing = "critic · skill critic.reviewing — Reviewing an image · 110 tokens"
        show(f"{out} .widget-select select option:has-text('{reviewing}')")
        page.locator(f"{out} .widget-select select").first.select_option(
            label=f"{reviewing} (critic.review)"
        )
        skill = f"{out} .murmur-knowledge[data-id='critic.reviewing']"
        show(f"{skill} .murmur-artifact[data-primitive='markdown'] h1:has-text('Reviewing')")
        show(f"{skill} .murmur-digest:has-text('sha256:362e79ce632893a2')")
        # InvocationView of gallery.thumbs: the six images as one grid, inside the widget.
        grid = f"{out} .jupyter-widgets .murmur-artifact[data-primitive='image_grid'] img"
        show(grid)
        page.wait_for_function(
            """sel => [...document.querySelectorAll(sel)]
                .filter(i => i.complete && i.naturalWidth > 0).length === 6""",
            arg=grid,
            timeout=SHOW_TIMEOUT_MS,
        )
        # CapabilityForm of the paid oracle: its fields and the approval panel with its reasons.
        show(f"{out} .jupyter-widgets button:has-text('Approve')")
        show(f"{out} .jupyter-widgets button:has-text('Cancel')")
        show(f"{out} .jupyter-widgets:has-text('effects.cost_known is false')")
        # The rendered artifacts: poster image, then table, markdown and JSON of the report.
        poster = f"{out} .murmur-artifact[data-primitive='image'] img"
        show(poster)
        assert _loaded_images(page, poster) == 1
        show(f"{out} .murmur-artifact[data-primitive='table'] table")
        show(f"{out} .murmur-artifact[data-primitive='markdown']")
        show(f"{out} .murmur-artifact[data-primitive='json']")
        # ConversationExplorer: paging buttons and a tool envelope expanded.
        show(f"{out} button:has-text('Older')")
        show(f"{out} .widget-html:has-text('tool_call_id')")
        show(f"{out} .widget-html:has-text('call_0113')")
        # HookConsole: the granted hook's note and the ungranted hook's not-granted.
        show(f"{out} .jupyter-widgets:has-text('320 messages')")
        show(f"{out} .jupyter-widgets:has-text('not-granted')")
        # The approval reasons and the audit table are plain outputs.
        show(f"{out}:has-text('declares no numeric cost')")
        show(f"{out} table:has-text('docs.report')")

        widgets = page.locator(f"{out} .jupyter-widgets.widget-vbox").count()
        errors = page.locator(
            f"{out}[data-mime-type='application/vnd.jupyter.stderr'], "
            f"{out}:has-text('Error displaying widget')"
        ).count()
        shots = artifacts_dir()
        show(grid).scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "browser-tour-grid.png"))
        show(skill).scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "browser-tour-skill.png"))
        show(f"{out} .murmur-badge:has-text('Needs setup')").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "browser-tour.png"))
        page.evaluate(
            "async () => window.jupyterapp.commands.execute("
            "'apputils:change-theme', {theme: 'JupyterLab Dark'})"
        )
        page.wait_for_function(
            "() => document.body.dataset.jpThemeLight === 'false'", timeout=SHOW_TIMEOUT_MS
        )
        for name, selector in [
            ("browser-tour-grid-dark", grid), ("browser-tour-skill-dark", skill),
            ("browser-tour-dark", f"{out} .murmur-badge:has-text('Needs setup')"),
        ]:  # fmt: skip
            show(selector).scroll_into_view_if_needed()
            page.screenshot(path=str(shots / f"{name}.png"))

    assert errors == 0, "an output shows an error or a widget failed to display"
    assert widgets >= 5, f"only {widgets} widget views in the page"
    assert problems == [], problems
    assert (shots / "browser-tour.png").stat().st_size > 10_000
