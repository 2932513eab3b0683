"""What to build and measure: the matrix.yaml schema (pydantic) and its loader, strict by type.
May use: toolkit.core; reads matrix.yaml; no Docker, no results, never prints.
"""
