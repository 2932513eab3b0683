"""What the toolkit knows about each benchmark program, and nothing of containers: one subpackage per
runtime (llama_bench, vllm, sglang) with its flags and settings, the argument lists it is run with,
and the parsers of what it prints. Below `results` (records are built from these parsers) and above
`spec`; the runtimes are independent of each other (import contract in pyproject.toml). Runners
(toolkit/bench/runners/) keep only the container side.

Adding runtime number four: a subpackage here, a runner, a template (docs/architecture.md).
May use: toolkit.core, toolkit.matrix; no runtime imports another; reads result files it is given,
no engine, never prints."""
