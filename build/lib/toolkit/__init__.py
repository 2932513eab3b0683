"""toolkit: build, benchmark and compare LLM inference images for the AMD Radeon AI PRO R9700.

Packages, lowest layer first (README, "Where the code is"; the contract in pyproject.toml): core, spec,
engine, results, host, models, analysis, images, bench, publish, campaign, cli.
May use: nothing; it only holds the version.
"""

__version__ = "0.1.0"
