"""Job types and jobs: the registry, job specs, published policies, enqueue, cron
maths and outcomes. Imports jobwarden.worker.core and jobwarden.worker.store
(docs/architecture.md §1)."""
