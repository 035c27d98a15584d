"""Replaying recorded conversations through hooks: ``replay`` and its helpers.

``windows`` (what ``compact`` is offered), ``sources`` (what records), ``run`` (the lifecycle
per record, in this process), ``cluster`` (the same on Dask workers), ``rows`` (the typed
frame), ``compare`` (two hooks side by side) and ``diff`` (one compaction, message by message,
for the viewer).
"""
