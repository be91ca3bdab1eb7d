"""Structured Streaming beyond the ``arctic`` format: joining a stream with a changing dimension."""

from arctic_sql.streaming.lookup_join import lookup_join

__all__ = ["lookup_join"]
