"""Vocabulary every layer shares: errors and their exit codes, device backends, GPU product specs,
process signal handling, the runner registry (names -> "module:Class" strings, loaded lazily), the
one safe JSON parse every reader uses (jsonsafe: the caller opens files).
May use: the standard library and pydantic only; no other toolkit package, no files, no Docker.
"""
