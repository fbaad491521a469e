"""One module per system: its job handlers, its worker entry point and a small driver
(`python -m bench.peers.apps.NAME_app install|enqueue|trickle ...`) that enqueues through
the system's own API, run in the system's own interpreter."""
