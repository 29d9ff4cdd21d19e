"""vaultsync's benchmarks: ``python -m benchmarks list | run NAME [--quick] | report [NAME]`` (see harness.py)."""
