"""The interactive shell's history: one entry per statement, however many lines it was typed on.

readline adds every line ``input()`` reads as an entry of its own, and writes its history file one
line per entry, so a statement typed over three lines would come back as three pieces. The shell
replaces the lines of a statement with one entry holding the whole statement, line breaks included
(so a ``--`` comment stays a comment when the statement is recalled and run again), and keeps its own
file: a header line, then one JSON string per entry. A file without the header (one readline wrote)
is read one entry per line.
"""

from __future__ import annotations

import json
import os
from types import ModuleType

HEADER = "# arctic-sql history v1: one JSON string per entry"


class History:
    """readline's history list, loaded from and saved to ``path``, at most ``length`` entries."""

    def __init__(self, readline: ModuleType, path: str, length: int) -> None:
        self._readline = readline
        self.path = path
        self.length = length

    @classmethod
    def open(cls, path: str, length: int) -> History | None:
        """The history at ``path`` loaded into readline; ``None`` where the platform has no readline."""
        try:
            import readline
        except ImportError:  # Windows without pyreadline: plain input(), no history
            return None
        history = cls(readline, os.path.expanduser(path), length)
        history.load()
        return history

    def entries(self) -> list[str]:
        rl = self._readline
        return [rl.get_history_item(i) for i in range(1, rl.get_current_history_length() + 1)]  # 1-based

    def mark(self) -> int:
        """A position to pass to :meth:`keep_as_one` once the statement begun now is complete."""
        return int(self._readline.get_current_history_length())

    def keep_as_one(self, mark: int, statement: str) -> None:
        """Replace the entries added since ``mark`` (the statement's lines) by the statement itself."""
        rl = self._readline
        while rl.get_current_history_length() > mark:
            rl.remove_history_item(rl.get_current_history_length() - 1)  # 0-based
        text = statement.strip("\n")
        previous = rl.get_history_item(mark) if mark > 0 else None
        if text.strip() and text != previous:  # as readline does: no blank entries, no repeats
            rl.add_history(text)

    def load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (OSError, UnicodeDecodeError):
            return
        if lines and lines[0] == HEADER:
            entries = []
            for line in lines[1:]:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, str):
                    entries.append(entry)
        else:
            entries = lines
        for entry in entries[-self.length :]:
            self._readline.add_history(entry)

    def save(self) -> None:
        lines = [HEADER] + [json.dumps(e, ensure_ascii=False) for e in self.entries()[-self.length :]]
        try:
            with open(self.path, "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
        except OSError:
            pass
