"""A bounded, thread-safe map of what a process read or wrote last, by location (the least recently
used entry goes first): the per-process caches of files that never change once written."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

V = TypeVar("V")


class Recent(Generic[V]):
    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[str, V] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, location: str, value: V) -> None:
        with self._lock:
            self._entries[location] = value
            self._entries.move_to_end(location)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def get(self, location: str) -> V | None:
        with self._lock:
            value = self._entries.get(location)
            if value is not None:
                self._entries.move_to_end(location)
            return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
