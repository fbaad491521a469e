"""The console's data layer: the store (`database`, the only module that runs SQL, with
the named queries of `sql/`), the console's tables (`schema`), and the models pages are
made of (`queries`, `sla`, `trends`). It imports the settings layer (jobwarden.console.core) and the
runtime, never a request (docs/architecture.md, "Console layers")."""
