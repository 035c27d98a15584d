"""Jupyter widgets over murmur-nb (ipywidgets 8).

Every widget is a thin view: what a button does is one plain call on the object the widget
was given (``host.invoke``, ``reader.read_messages``, ``hooks.task_start``), and each
widget's ``text/plain`` is a stable summary (no model ids, addresses, timings or absolute
home paths), so notebooks that show them compare cleanly under nbval. This is the only
part of murmur-nb that imports ipywidgets; ``murmur_nb.widgets`` is also reachable lazily
as an attribute of ``murmur_nb``.

Examples
--------
>>> import murmur_nb as mnb                                       # doctest: +SKIP
>>> from murmur_nb.widgets import (BatchView, CapabilityForm, ConversationExplorer,
...     HookConsole, InvocationView, LiveRun, ModuleBrowser)         # doctest: +SKIP
>>> demo = mnb.prepare_demo_home()                                 # doctest: +SKIP
>>> host = mnb.ModuleHost(home=demo.facet_home, policy=demo.policy(),
...                       artifact_store=demo.artifact_store)      # doctest: +SKIP
>>> ModuleBrowser(host)                     # modules, effects, setup, refusals  # doctest: +SKIP
>>> form = CapabilityForm(host, "gallery.thumbs", values={"count": 3})  # doctest: +SKIP
>>> form.run_button.click(); form.wait()    # a LiveRun: Cancel, polls  # doctest: +SKIP
>>> form.result                              # an InvocationView      # doctest: +SKIP
>>> host.invoke("docs.report", {}, progress=LiveRun.in_cell)  # live in the cell  # doctest: +SKIP
>>> InvocationView(host.invoke("docs.report", {}))                 # doctest: +SKIP
>>> store = mnb.ConversationStore(demo.murmur_home)                # doctest: +SKIP
>>> hooks = mnb.HookHost.from_config(demo.murmur_yaml, conversations=store)  # doctest: +SKIP
>>> HookConsole(hooks, store)                                      # doctest: +SKIP
>>> BatchView(host.map("docs.report", [{}] * 3, background=True))  # doctest: +SKIP
>>> ConversationExplorer(store, demo.context_id)                   # doctest: +SKIP
>>> CompactionViewer(mnb.replay(hooks, demo.context_id, windows=100), store)  # doctest: +SKIP

Driving a widget from code (tests, scripts, a notebook cell that should run unattended)
uses the same attributes a person clicks: set an input's ``.value`` (or
``CapabilityForm.set_value``), then ``some_button.click()``. Run buttons start the call in
the background (a :class:`LiveRun`); ``form.wait()`` waits for it. Every widget's
mimebundle also carries a static ``text/html`` of its content, shown where no widget
manager runs (nbconvert, GitHub, nbviewer, the headless report).
"""

from murmur_nb.widgets._batch_view import BatchView
from murmur_nb.widgets._capability_form import CapabilityForm
from murmur_nb.widgets._compaction_viewer import CompactionViewer
from murmur_nb.widgets._conversation_explorer import ConversationExplorer
from murmur_nb.widgets._hook_console import HookConsole
from murmur_nb.widgets._invocation_view import InvocationView
from murmur_nb.widgets._live_run import LiveRun
from murmur_nb.widgets._module_browser import ModuleBrowser

__all__ = [
    "BatchView",
    "CapabilityForm",
    "CompactionViewer",
    "ConversationExplorer",
    "HookConsole",
    "InvocationView",
    "LiveRun",
    "ModuleBrowser",
]
