"""Where a table's files live and how they are reached: file systems, FileIO, manifests, position deletes."""
