"""vLLM: settings.py (the `vllm:` block of matrix.yaml, registered in toolkit.core.registry.SETTINGS),
output.py (`vllm bench latency|serve|throughput` result files and their checks).
May use: toolkit.core, toolkit.spec (as toolkit.runtimes); never another runtime."""
