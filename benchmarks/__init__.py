"""Benchmarks of arctic-sql against its peers (the workloads and figures: README.md here)."""
