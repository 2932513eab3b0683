"""This machine: GPUs, render nodes and /dev/kfd (device passthrough), host facts, `toolkit doctor`.
May use: toolkit.core..results; reads /sys, /proc and /dev; asks the engine through toolkit.engine; never prints.
"""
