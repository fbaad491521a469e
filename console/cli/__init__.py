"""The console's sub-commands of `jobwarden` (`console`, `user add`, `user reset`, `demo`),
contributed through the `jobwarden.commands` entry point
(`jobwarden.console.cli.commands:register`).
The top layer: it builds the standalone console through the package's front door
(docs/architecture.md, "Console layers")."""
