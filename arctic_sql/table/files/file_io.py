"""pyiceberg's PyArrowFileIO with fewer requests per file on an object store.

Every table's FileIO (the catalog's ``py-io-impl``, set by ``options.load_catalog``) and arctic's
own file systems (``storage.file_io``) are this one, so pyiceberg's manifests and metadata files
and arctic's data files are written the same way:

- S3 file systems open files lazily (pyarrow's ``allow_delayed_open``): a file smaller than one
  upload part is one PUT when it closes, instead of a multipart upload's three requests (create,
  part, complete), and opening it makes no request;
- a file written through it knows its length from the bytes written, so pyiceberg's
  ``len(output_file)`` after writing a manifest asks the store nothing (a HEAD).
"""

from __future__ import annotations

from typing import Any

import pyarrow.fs as pafs
from pyiceberg.io.pyarrow import PyArrowFile, PyArrowFileIO


class ArcticFileIO(PyArrowFileIO):
    def _initialize_s3_fs(self, netloc: str | None) -> pafs.FileSystem:
        built = super()._initialize_s3_fs(netloc)
        rebuild, (options,) = built.__reduce__()  # pyiceberg's options, plus ours
        return rebuild({**options, "allow_delayed_open": True})

    def new_output(self, location: str) -> PyArrowFile:
        made = super().new_output(location)
        return SizedOutput(location, made._path, made._filesystem, made._buffer_size)


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

    def close(self) -> None:
        if not self._stream.closed:
            length = self._stream.tell()
            self._stream.close()
            self._file.written = length

    def __enter__(self) -> _Counted:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
