"""Rendering: presentation hints resolved to one primitive each, within a budget."""
