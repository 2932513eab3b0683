"""Measuring: `toolkit bench` (run.py orchestrates), its guards (one benchmark per engine, what must not
be lost), `toolkit tune`, and the runners (runners/: llama-bench, vLLM, SGLang plug-ins).
May use: toolkit.core..images; Docker only through toolkit.engine; writes results/; never prints.
"""
