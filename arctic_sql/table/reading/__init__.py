"""Reading a table: scan planning, merge-on-read, changes between versions, time travel, tags, metadata rows."""
