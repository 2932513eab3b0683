"""vLLM: settings.py (the `vllm:` block of matrix.yaml, registered in toolkit.core.registry.SETTINGS),
args.py (the argument lists, the runs and cases a matrix asks for, log notes, known upstream bugs),
output.py (`vllm bench latency|serve|throughput` result files and their checks).
May use: toolkit.core, toolkit.matrix (as toolkit.runtimes); never another runtime."""
