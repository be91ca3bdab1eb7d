"""Benchmarks of arctic-sql against its peers (see /work/shared/BENCHMARKS.md and README.md here)."""
