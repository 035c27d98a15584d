"""Where a widget's "Copy as code" puts the call it wrote (:mod:`murmur_nb._forms.as_code`).

IPython's ``set_next_input`` puts text in the next cell, but JupyterLab takes it only from
the reply to the cell being executed. A button click arrives as a comm message, which has
no reply to carry it: the payload would wait in the kernel and ride on the reply of
whatever cell runs next. So :func:`insert_next_cell` uses it only while a cell executes (a
plain call such as ``browser.copy_as_code()`` in a cell), and every click also shows the
code in a :class:`CodeBox`: a read-only text area, where Ctrl+A, Ctrl+C copies it.
Nothing here needs JavaScript of our own (no clipboard call, no custom widget), so
JupyterLab, Notebook 7 and Voilà show the same thing. The text area is named for a screen
reader by its tooltip (the caption above it is a separate HTML widget, and a description
would print the name a second time beside the code).
"""

from __future__ import annotations

from typing import Any

import ipywidgets as w
from IPython import get_ipython

from murmur_nb._forms.as_code import invoke_code
from murmur_nb.widgets._html import FG_MUTED, esc

__all__ = ["CodeBox", "host_name", "insert_next_cell", "invoke_call"]

#: Code in the text area is set in the notebook's code font.
_STYLE = (
    "<style>.murmur-code textarea{font-family:var(--jp-code-font-family,monospace);"
    "font-size:var(--jp-code-font-size,13px)}</style>"
)


def insert_next_cell(code: str) -> bool:
    """Put ``code`` in a new cell after the one executing now; ``False`` when no cell is
    executing (a widget's click, a script), which changes nothing."""
    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return False
    parent = kernel.get_parent() or {}
    if parent.get("header", {}).get("msg_type") != "execute_request":
        return False
    shell.set_next_input(code, replace=False)
    return True


def host_name(host: Any, given: str | None = None) -> str:
    """The variable to call ``host`` by in generated code: ``given``, else a name the
    notebook binds to this very host (``host`` first, then alphabetical), else ``host``."""
    if given:
        return given
    shell = get_ipython()
    names = getattr(shell, "user_ns", None) or {}
    bound = sorted(
        name for name, value in list(names.items())
        if value is host and name.isidentifier() and not name.startswith("_")
    )  # fmt: skip
    return "host" if not bound or "host" in bound else bound[0]


def invoke_call(host: str, capability: str, input: Any, *, staged: bool = False) -> str:
    """The ``host.invoke`` call of a widget's run; a run that handed the module staged
    artifacts passes ``staged=staged``, under a line saying what that list holds."""
    if not staged:
        return invoke_code(capability, input, host=host)
    note = f"# staged: the artifacts the input names, each from {host}.stage(artifact)\n"
    return note + invoke_code(capability, input, host=host, staged="staged")


class CodeBox(w.VBox):  # type: ignore[misc]
    """A read-only text area holding generated code, with a line saying what it is.

    Hidden until :meth:`show` fills it; an edit in the page is put back (it stays the code
    of the run it names). ``code`` is what it holds.
    """

    def __init__(self) -> None:
        self.code = ""
        self.caption = w.HTML()
        self.area = w.Textarea(rows=3, layout=w.Layout(width="100%"), tooltip="generated code")
        self.area.add_class("murmur-code")
        self.area.observe(self._put_back, names="value")
        super().__init__([self.caption, self.area], layout=w.Layout(display="none"))
        self.add_class("murmur-code-box")

    def show(self, code: str, what: str) -> None:
        """Hold ``code`` (the call for ``what``) and show it."""
        self.code = code
        self.caption.value = (
            f"{_STYLE}<small style='color:{FG_MUTED}'>{esc(what)} as code (select it: Ctrl+A, "
            "then Ctrl+C)</small>"
        )
        self.area.tooltip = f"{what} as code (read-only)"
        self.area.rows = min(max(code.count("\n") + 1, 2), 16)
        self.area.value = code
        self.layout.display = None

    def _put_back(self, change: Any) -> None:
        if change["new"] != self.code:
            self.area.value = self.code
