"""The console's bottom layer: its settings (`config`), where its templates and static
files are (`resources`), and the rules every layer shares (user names and passwords, which
workers are live). It imports nothing of the console (docs/architecture.md, "Console
layers")."""
