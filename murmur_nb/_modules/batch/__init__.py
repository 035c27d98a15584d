"""Running one capability over a whole dataset: ``ModuleHost.map`` and its :class:`Batch`.

This package sits above the module host and below ``widgets``: it uses the host's public API
(one :class:`~murmur_nb.PreparedCall` made once per batch, each row one ``run`` of it), never
the other way round (``ModuleHost.map`` imports it inside the
method), and it never imports ipywidgets (``murmur_nb.widgets.BatchView`` is the view).

* :mod:`.inputs`: a DataFrame, a list or an iterable of dicts -> checked, canonical rows;
* :mod:`.journal`: the SQLite journal that makes a batch resumable;
* :mod:`.record`: one finished row as JSON, and back to an :class:`~murmur_nb.Invocation`;
* :mod:`.longrun`: start + poll of a long-running capability, as one row;
* :mod:`.plan`: the prepared call (and its approval) every row runs, made once;
* :mod:`.local`: one row on this machine, run from a thread pool;
* :mod:`.payload`, :mod:`.cluster`: rows on Dask workers, each from a shipped, re-hashed snapshot;
* :mod:`.frame`: the batch as a DataFrame, and its images as one grid;
* :mod:`.batch`: the :class:`Batch` that ties them together.
"""
