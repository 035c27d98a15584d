"""The module host pipeline: catalog, request, approval, run, envelope, artifacts, audit."""
