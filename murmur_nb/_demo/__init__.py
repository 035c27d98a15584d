"""The demo: a facet-studio home with the shipped modules, a hook and a record."""
