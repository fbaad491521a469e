"""Jobwarden's job runtime. The public API is re-exported here (DESIGN §4)."""
