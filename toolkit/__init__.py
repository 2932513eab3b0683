"""toolkit: build, benchmark and compare LLM inference images for the AMD Radeon AI PRO R9700."""

__version__ = "0.1.0"
