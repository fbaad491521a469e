"""The engine that runs jobs: producer, executor, runner, completer, heartbeat,
listener, lanes and the handler's context (docs/architecture.md §1)."""
