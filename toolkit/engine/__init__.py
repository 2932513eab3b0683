"""The only code that talks to the container engine: the docker SDK (containers, images, volumes,
registry lookups) and the docker/buildx command line (builds, manifests).
May use: toolkit.core, toolkit.matrix, the docker SDK; never prints.
"""
