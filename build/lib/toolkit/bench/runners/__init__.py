"""Runner plug-ins: one module per benchmark program (llama-bench, vLLM, SGLang) on the shared container
scaffolding of base.py; registered by name in toolkit.core.registry. Runners never import each other.
May use: toolkit.core..images and runners.base; Docker only through the injected engine; never prints.
"""
