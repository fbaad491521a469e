"""The runtime's core: states, errors, retry policy, the transitions table, redaction,
text safety, leases and logging. Imports nothing else of the runtime (docs/architecture.md §1)."""
