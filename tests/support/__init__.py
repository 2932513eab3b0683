"""The tests' one helpers package: fakes (one fake engine, a fake R9700 sysfs tree, NVML), one record
factory, projects and CLI runners for e2e tests, service containers, pinned contract environments.
Test modules import helpers from here, never from each other (tests/test_architecture.py)."""
