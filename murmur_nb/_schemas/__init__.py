"""Bounded JSON Schema checks: schemas, budgets, patterns, nesting, and the describe descriptor."""
