"""The periodic duties: recovery of lost jobs, schedules, retention
(docs/architecture.md §1)."""
