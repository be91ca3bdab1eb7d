"""The live entries of Iceberg manifests, cached: manifests never change once written."""

from __future__ import annotations

from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestEntry, ManifestFile

_MANIFEST_CACHE: dict[str, tuple[ManifestEntry, ...]] = {}
_MANIFEST_CACHE_LIMIT = 4096


def manifest_entries(io: FileIO, manifest: ManifestFile) -> tuple[ManifestEntry, ...]:
    # Manifests are immutable once written, so their live entries can be cached by path.
    cached = _MANIFEST_CACHE.get(manifest.manifest_path)
    if cached is None:
        if len(_MANIFEST_CACHE) >= _MANIFEST_CACHE_LIMIT:
            _MANIFEST_CACHE.clear()
        cached = tuple(manifest.fetch_manifest_entry(io, discard_deleted=True))
        _MANIFEST_CACHE[manifest.manifest_path] = cached
    return cached
