"""What was measured: record schema and store (results/<digest12>/bench.jsonl), the SQLite query index,
the one test identity, llama-bench's flags and output formats, `toolkit import`.
May use: toolkit.core, toolkit.spec, toolkit.engine (facts only); reads and writes results/; never prints.
"""
