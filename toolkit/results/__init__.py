"""What was measured: record schema and store (results/<digest12>/bench.jsonl), the SQLite query index,
the one test identity, `toolkit import` (each runtime's output parsers: toolkit.runtimes).
May use: toolkit.core, toolkit.spec, toolkit.engine (facts only), toolkit.runtimes; reads and writes
results/; never prints.
"""
