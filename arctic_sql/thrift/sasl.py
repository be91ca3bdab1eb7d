"""The server side of HiveServer2's SASL transport, mechanism PLAIN (what ``auth=NONE``/LDAP/CUSTOM use).

thrift-sasl and pure-sasl only implement the client side, so the server's half of the exchange is
here. The wire format (Thrift's TSaslTransport): every handshake message is ``status byte + 4-byte
big-endian length + payload``; the client sends START with the mechanism name, then the PLAIN
response ``authzid NUL authcid NUL password`` (the Java driver marks it COMPLETE, thrift-sasl OK:
both are accepted); the server answers COMPLETE (or BAD with a reason). After that every Thrift
message in either direction is a frame ``4-byte length + bytes`` (PLAIN negotiates no wrapping).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from io import BytesIO

from thrift.transport.TTransport import CReadableTransport, TTransportBase, TTransportException

START, OK, BAD, ERROR, COMPLETE = 1, 2, 3, 4, 5
MAX_HANDSHAKE_PAYLOAD = 64 * 1024
MAX_FRAME = 16 * 1024 * 1024


class AuthenticationFailed(Exception):
    """The client's credentials or mechanism were refused; the connection is closed."""


class SaslServerTransport(TTransportBase, CReadableTransport):
    """One client connection speaking SASL PLAIN, then length-framed Thrift messages.

    ``authenticate(user, password)`` returns None to accept the credentials, or the reason to refuse
    them. ``user`` is set after :meth:`handshake`: the authenticated name, which is the session's user
    whatever OpenSession says (clients such as beeline leave it out there). A frame longer than
    ``max_frame`` bytes closes the connection before any of it is read.
    """

    def __init__(
        self,
        transport: TTransportBase,
        authenticate: Callable[[str, str], str | None],
        max_frame: int = MAX_FRAME,
    ) -> None:
        self._transport = transport
        self._authenticate = authenticate
        self._max_frame = max_frame
        self._rbuf = BytesIO(b"")
        self._wbuf = BytesIO()
        self.user: str | None = None

    # handshake -----------------------------------------------------------------------------
    def handshake(self) -> None:
        status, mechanism = self._read_message()
        if status != START:
            self._refuse(ERROR, "Expected a SASL START message")
        if mechanism.decode("utf-8", "replace").upper() != "PLAIN":
            self._refuse(BAD, f"Unsupported SASL mechanism {mechanism.decode('utf-8', 'replace')}; use PLAIN")
        status, response = self._read_message()
        if status not in (OK, COMPLETE):
            self._refuse(ERROR, "Expected the SASL PLAIN response")
        parts = response.split(b"\0")
        if len(parts) != 3:
            self._refuse(BAD, "Malformed SASL PLAIN response")
        user, password = parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
        refusal = self._authenticate(user, password)
        if refusal is not None:
            self._refuse(BAD, refusal)
        self.user = user
        self._send_message(COMPLETE, b"")

    def _read_message(self) -> tuple[int, bytes]:
        header = self._transport.readAll(5)
        status, length = header[0], struct.unpack(">I", header[1:])[0]
        if length > MAX_HANDSHAKE_PAYLOAD:
            self._refuse(ERROR, "SASL handshake message too long")
        return status, self._transport.readAll(length) if length else b""

    def _send_message(self, status: int, payload: bytes) -> None:
        self._transport.write(bytes([status]) + struct.pack(">I", len(payload)) + payload)
        self._transport.flush()

    def _refuse(self, status: int, reason: str) -> None:
        try:
            self._send_message(status, reason.encode("utf-8"))
        finally:
            self._transport.close()
        raise AuthenticationFailed(reason)

    # framed transport ----------------------------------------------------------------------
    def isOpen(self) -> bool:
        return self._transport.isOpen()

    def open(self) -> None:
        self._transport.open()

    def close(self) -> None:
        self._transport.close()

    def read(self, sz: int) -> bytes:
        data = self._rbuf.read(sz)
        if data:
            return data
        self._read_frame()
        return self._rbuf.read(sz)

    def _read_frame(self) -> None:
        length = struct.unpack(">I", self._transport.readAll(4))[0]
        if length > self._max_frame:
            raise TTransportException(
                TTransportException.SIZE_LIMIT,
                f"a frame of {length} bytes exceeds the limit of {self._max_frame}",
            )
        self._rbuf = BytesIO(self._transport.readAll(length))

    def write(self, buf: bytes) -> None:
        self._wbuf.write(buf)

    def flush(self) -> None:
        payload = self._wbuf.getvalue()
        self._wbuf = BytesIO()
        self._transport.write(struct.pack(">I", len(payload)) + payload)
        self._transport.flush()

    # TBinaryProtocolAccelerated reads through this interface
    @property
    def cstringio_buf(self) -> BytesIO:
        return self._rbuf

    def cstringio_refill(self, partialread: bytes, reqlen: int) -> BytesIO:
        data = partialread
        while len(data) < reqlen:
            self._read_frame()
            data += self._rbuf.getvalue()
        self._rbuf = BytesIO(data)
        return self._rbuf
