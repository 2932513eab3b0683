"""llama-bench (llama.cpp): args.py (the one flag table: command line built and read back),
readers.py (its output formats: JSONL, JSON, CSV, SQL, markdown), check.py (the validity pass of a
row), output.py (normalised fields, test names, CPU-fallback rule).
May use: toolkit.core, toolkit.spec (as toolkit.runtimes); never another runtime."""
