"""Vocabulary every layer shares: errors and their exit codes, device backends, GPU product specs,
process signal handling, the runner registry (names -> "module:Class" strings, loaded lazily).
May use: the standard library and pydantic only; no other toolkit package, no files, no Docker.
"""
