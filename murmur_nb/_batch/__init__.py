"""Running one capability over a whole dataset: ``ModuleHost.map`` and its :class:`Batch`.

A layer of its own, above the module host and below ``widgets``: it uses the host's public
API only (one :class:`~murmur_nb.PreparedCall` made once per batch, each row one ``run`` of
it), and the host imports nothing of it. ``ModuleHost.map`` is the host's thin entry point:
importing this package registers :meth:`Batch.start` as the host's ``map`` driver
(:func:`murmur_nb._modules.host.register_driver`), and ``import murmur_nb`` imports it. It
never imports ipywidgets (``murmur_nb.widgets.BatchView`` is the view).

* :mod:`.inputs`: a DataFrame, a Series or a list or an iterable of dicts -> checked,
  canonical rows;
* :mod:`.options`: ``map``'s options, checked before anything runs, and the run options'
  share of the journal key;
* :mod:`.journal`: the SQLite journal that makes a batch resumable;
* :mod:`.hold`: a running batch's hold on its journal's rows, so no other batch runs them;
* :mod:`.record`: one finished row as JSON, and back to an :class:`~murmur_nb.Invocation`;
* :mod:`.longrun`: start + poll of a long-running capability, as one row;
* :mod:`.plan`: the prepared call (and its approval) every row runs, made once;
* :mod:`.local`: one row on this machine, run from a thread pool;
* :mod:`.payload`, :mod:`.cluster`: rows on Dask workers, each from a shipped, re-hashed snapshot;
* :mod:`.frame`: the batch as a DataFrame, and its images as one grid;
* :mod:`.progress`: how far a batch is, and the bar that draws it;
* :mod:`.batch`: the :class:`Batch` that ties them together.
"""

from murmur_nb._batch.batch import Batch
from murmur_nb._modules.host import register_driver

__all__ = ["Batch"]

register_driver("map", Batch.start)
