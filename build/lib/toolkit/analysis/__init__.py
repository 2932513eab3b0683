"""Pure reading of results: tables (one row model), roofline, verdict (routing rule), plots, compare,
report rendering.
May use: toolkit.core..models; reads records through toolkit.results; no Docker, no device access, never prints.
"""
