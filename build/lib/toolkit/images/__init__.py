"""Images: template rendering (Dockerfile.templates/ -> images/), sources, `toolkit build` and its
progress model, `toolkit pins`.
May use: toolkit.core..analysis; Docker only through toolkit.engine; writes images/ and results/builds.jsonl; never prints.
"""
