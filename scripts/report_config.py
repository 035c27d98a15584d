"""nbconvert settings for a report that shows every widget's content offline.

Used by ``scripts/demo --headless`` (``jupyter nbconvert --config scripts/report_config.py``).
murmur-nb widgets carry a static ``text/html`` fallback beside their widget view; preferring
it, and storing no widget state, makes the report a plain page: nothing is fetched from a
CDN to draw a widget. The ``offline`` template (``scripts/report_template/offline``) also
leaves out the require.js, MathJax and Mermaid scripts nbconvert's lab template loads from
a CDN, so the report loads nothing from the network and reads the same with it off.
"""

from pathlib import Path

c = get_config()  # type: ignore[name-defined]  # noqa: F821 - provided by traitlets

c.NbConvertBase.display_data_priority = [
    "text/html",
    "text/markdown",
    "image/svg+xml",
    "text/latex",
    "image/png",
    "image/jpeg",
    "application/vnd.jupyter.widget-view+json",
    "text/plain",
]
c.ExecutePreprocessor.store_widget_state = False
c.HTMLExporter.extra_template_basedirs = [str(Path(__file__).resolve().parent / "report_template")]
c.HTMLExporter.template_name = "offline"
