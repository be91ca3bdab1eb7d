"""dbt commands run one after another in one process, through dbt's programmatic entry point
(``dbtRunner``, what ``dbt`` on the command line calls): the test sends a command's arguments as a
JSON list on stdin and reads ``{"success": ..., "output": ...}`` from the file descriptor named in
argv[1] (dbt itself writes to stdout). dbt's import costs about 4 s of CPU a process here; a test
running eleven commands pays it once.
"""

from __future__ import annotations

import json
import os
import sys
import traceback

from dbt.cli.main import dbtRunner


def main() -> None:
    replies = os.fdopen(int(sys.argv[1]), "w")
    for line in sys.stdin:
        messages: list[str] = []
        try:
            result = dbtRunner(callbacks=[lambda event: messages.append(event.info.msg)]).invoke(
                json.loads(line)
            )
            success = result.success
            if result.exception is not None:
                messages.append(f"{type(result.exception).__name__}: {result.exception}")
        except Exception:  # noqa: BLE001 - the test reads what happened
            success = False
            messages.append(traceback.format_exc())
        replies.write(json.dumps({"success": bool(success), "output": "\n".join(messages)}) + "\n")
        replies.flush()


if __name__ == "__main__":
    main()
