"""pyiceberg's PyArrowFileIO with fewer requests per file on an object store.

Every table's FileIO (the catalog's ``py-io-impl``, set by ``options.load_catalog``) and arctic's
own file systems (``storage.file_io``) are this one, so pyiceberg's manifests and metadata files
and arctic's data files are written the same way:

- S3 file systems open files lazily (pyarrow's ``allow_delayed_open``): a file smaller than one
  upload part is one PUT when it closes, instead of a multipart upload's three requests (create,
  part, complete), and opening it makes no request;
- a file written through it knows its length from the bytes written, so pyiceberg's
  ``len(output_file)`` after writing a manifest asks the store nothing (a HEAD);
- a small Avro file it wrote (a manifest list, a manifest) is read back from the bytes it wrote:
  every commit reads its parent's manifest list, which on a stream of commits from one process is
  the one the last commit wrote, and on an object store that read is a HEAD (pyarrow sizes every
  file it opens, and its Python API takes no known size) and a GET. Iceberg's metadata files are
  written once under a new name (a uuid) and never changed, so the bytes are that file's for good.
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
from pyiceberg.io.pyarrow import PyArrowFile, PyArrowFileIO

from arctic_sql.table.files.recent import Recent


class ArcticFileIO(PyArrowFileIO):
    def _initialize_s3_fs(self, netloc: str | None) -> pafs.FileSystem:
        built = super()._initialize_s3_fs(netloc)
        rebuild, (options,) = built.__reduce__()  # pyiceberg's options, plus ours
        return rebuild({**options, "allow_delayed_open": True})

    def new_input(self, location: str) -> PyArrowFile:
        made = super().new_input(location)
        if not location.endswith(".avro"):
            return made
        return KeptInput(location, made._path, made._filesystem, made._buffer_size)

    def new_output(self, location: str) -> PyArrowFile:
        made = super().new_output(location)
        return SizedOutput(location, made._path, made._filesystem, made._buffer_size)


# Avro files written in this process, by location, most recently written or read last. A manifest
# list is a few KB; a manifest of many files can be MBs, and is kept only up to KEPT_FILE_BYTES.
KEPT_FILES = 64
KEPT_FILE_BYTES = 256 * 1024
_kept: Recent[bytes] = Recent(KEPT_FILES)


def kept(location: str) -> bytes | None:
    """The bytes this process wrote to the Avro file at ``location``, if it still keeps them."""
    return _kept.get(location)


class KeptInput(PyArrowFile):
    """An Avro input file, read from the bytes this process wrote to it when it still has them."""

    def open(self, seekable: bool = True) -> Any:
        data = kept(self.location)
        if data is None:
            return super().open(seekable)
        return pa.BufferReader(data)


class SizedOutput(PyArrowFile):
    """An output file whose length, once written and closed, is the bytes written."""

    written: int | None = None

    def create(self, overwrite: bool = False) -> Any:
        return _Counted(super().create(overwrite), self)

    def __len__(self) -> int:
        return self.written if self.written is not None else super().__len__()


class _Counted:
    """A pyarrow output stream that records its length in its file when it closes."""

    def __init__(self, stream: Any, file: SizedOutput) -> None:
        self._stream, self._file = stream, file
        self._copy: io.BytesIO | None = io.BytesIO() if file.location.endswith(".avro") else None

    def write(self, data: Any) -> int:
        if self._copy is not None:
            self._copy.write(data)
            if self._copy.tell() > KEPT_FILE_BYTES:
                self._copy = None
        written: int = self._stream.write(data)
        return written

    def close(self) -> None:
        if not self._stream.closed:
            length = self._stream.tell()
            self._stream.close()  # on an object store the upload completes here, or raises
            self._file.written = length
            # Kept only when every byte went through write() (another method of the stream, such
            # as writelines, would leave the copy short): a short copy is never served.
            if self._copy is not None and self._copy.tell() == length:
                _kept.put(self._file.location, self._copy.getvalue())

    def __enter__(self) -> _Counted:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
