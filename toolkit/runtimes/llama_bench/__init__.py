"""llama-bench (llama.cpp): args.py (the one flag table: command line built and read back),
readers.py (its output formats: JSONL, JSON, CSV, SQL, markdown), validity.py (the validity pass),
check.py (a row's fields, numbers and rules, its normalised fields), output.py (progress lines, probe).
May use: toolkit.core, toolkit.matrix (as toolkit.runtimes); never another runtime."""
