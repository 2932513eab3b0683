"""What to build and measure: matrix.yaml's schema (pydantic) and its loader, strict by type. Its door
is `toolkit.matrix.api`, the only module other packages import (tests/test_architecture.py DOORS).
May use: toolkit.core; reads matrix.yaml; no Docker, no results, never prints.
"""
