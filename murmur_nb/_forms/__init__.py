"""A headless form built from a request schema (the widgets draw it)."""
