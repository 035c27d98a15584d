"""The demo modules shipped with murmur-nb, as sources.

Each sub-folder is one modproto v1 module (``main.py`` plus the overlay and skill files its
descriptor names). :func:`murmur_nb.prepare_demo_home` copies a folder, together with the shared
``_kit.py``, into ``<facet_home>/modules/<module-id>/`` and writes the executable ``module``
launcher there. The modules use the standard library and Pillow only, never :mod:`murmur_nb`.

==============  ===========================================================================
``gallery``     generative images (image, image_grid), a pipeline diagram (SVG/Mermaid/DOT)
``studio``      a WAV tone (audio), an MP4 clip through ffmpeg (video), and a long-running
                storyboard job with its poll capability (timeline, slides)
``docs``        a report: multi-page PDF, CSV and Parquet tables, Markdown, text, JSON, zip
``critic``      reviews an image staged read-only from another module (markdown, json, image)
``oracle``      a second opinion from a paid provider of unknown cost: needs approval
``transcribe``  needs whisper.cpp, which is not installed: the "Needs setup" example
==============  ===========================================================================

Nothing here is imported at run time; :data:`murmur_nb._demo.home.DEMO_MODULE_IDS` lists the
folders. The package form exists so that ``mypy --strict`` checks every module's source.
"""
