"""Records kept beside a table: write leases, stream consumers, optimizing processes, maintenance runs."""
