"""Jobwarden's operations console (Flask)."""
