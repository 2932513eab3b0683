"""llama-bench (llama.cpp): args.py (the one flag table: command line built and read back),
readers.py (its output formats: JSONL, JSON, CSV, SQL, markdown), check.py (a row: the validity
pass, its normalised fields, the CPU-fallback rule), output.py (progress lines, the GPU-path probe).
May use: toolkit.core, toolkit.matrix (as toolkit.runtimes); never another runtime."""
