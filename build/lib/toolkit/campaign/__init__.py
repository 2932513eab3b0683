"""Many hosts: one matrix over Slurm nodes (job scripts, state from Slurm) and Kubernetes manifests.
May use: toolkit.core..publish; Slurm through its command line; never prints.
"""
