"""Writing a table: one module per kind of write, and the commit (the only code that writes metadata)."""
