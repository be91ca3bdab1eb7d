"""Maintenance: snapshot expiration, change-data TTL, orphan removal, rollback, purge."""
