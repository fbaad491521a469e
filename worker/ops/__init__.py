"""Operator actions and reconciliation, each with its audit row (docs/architecture.md §1)."""
