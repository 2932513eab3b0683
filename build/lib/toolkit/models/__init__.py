"""Model files: `fetch-model` (Hugging Face Hub), the tiny stand-in GGUF and HF checkpoint, shape twins,
checkpoint quantization and model-file checks.
May use: toolkit.core..host; reads and writes models/; never prints.
"""
