"""SGLang: args.py (the `sglang:` block of matrix.yaml, the argument lists, and the parsers of
bench_one_batch and bench_serving results).
May use: toolkit.core, toolkit.matrix (as toolkit.runtimes); never another runtime."""
