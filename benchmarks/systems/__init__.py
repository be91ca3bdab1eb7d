"""One script per system; each runs as its own subprocess (``python -m benchmarks.systems.<name>``)."""
