"""The table model: ArcticTable, its identifiers, properties and settings, schemas. Imports no other wing."""
