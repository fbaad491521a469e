"""Job types and jobs: the registry, job specs, published policies, enqueue, cron
maths and outcomes. Imports worker.core and worker.store (docs/architecture.md §1)."""
