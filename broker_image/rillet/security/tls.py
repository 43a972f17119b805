"""TLS for listeners (SSL security protocol) with the standard library's ssl module.

Keys and certificates come in Kafka's PEM form: `ssl.keystore.location` names a PEM file with
the private key and the certificate chain (or `ssl.keystore.key` + `ssl.keystore.certificate.
chain` carry them inline), `ssl.key.password` decrypts an encrypted key, and the truststore is a
PEM file of CA certificates (`ssl.truststore.location`) or inline (`ssl.truststore.certificates`).
`ssl.client.auth` = none | requested | required asks clients for a certificate (mTLS); the
principal of such a client is its certificate's subject, as Kafka's default mapping gives it.

Files are re-read when they change (checked at most every RELOAD_CHECK_S, on a new connection):
certificates renewed on disk apply to new connections without a restart, and a broken
replacement is logged and ignored until it is fixed, keeping the last good context.
"""
from __future__ import annotations

import asyncio
import logging
import os
import ssl
import tempfile
import time
from typing import Callable

from ..defs.tls import TlsConfigError, TlsSettings, principal_from_subject
from .session import ANONYMOUS

log = logging.getLogger(__name__)

RELOAD_CHECK_S = 5.0
CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
               "required": ssl.CERT_REQUIRED}


def _load_keystore(ctx: ssl.SSLContext, s: TlsSettings) -> None:
    if s.keystore_location:
        ctx.load_cert_chain(s.keystore_location, password=s.key_password)
        return
    if not (s.keystore_key and s.keystore_chain):
        return
    # load_cert_chain reads files only: the inline PEM goes through a private temporary file
    # that lives for the duration of the call.
    fd, path = tempfile.mkstemp(prefix="rillet-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(s.keystore_key.strip() + "\n" + s.keystore_chain.strip() + "\n")
        ctx.load_cert_chain(path, password=s.key_password)
    finally:
        os.unlink(path)


def _load_truststore(ctx: ssl.SSLContext, s: TlsSettings) -> None:
    if s.truststore_location:
        ctx.load_verify_locations(cafile=s.truststore_location)
    if s.truststore_certificates:
        ctx.load_verify_locations(cadata=s.truststore_certificates)


def server_context(s: TlsSettings) -> ssl.SSLContext:
    s.check()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_keystore(ctx, s)
    ctx.verify_mode = CLIENT_AUTH[s.client_auth]
    if s.has_truststore:
        _load_truststore(ctx, s)
    return ctx


def client_context(s: TlsSettings) -> ssl.SSLContext:
    """How this broker dials an SSL listener of another node (replication, the controller):
    it trusts the truststore (the system's CAs without one), checks the host name unless
    ssl.endpoint.identification.algorithm is empty, and shows its own certificate, which a
    listener with ssl.client.auth=required asks for."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = s.verify_hostname
    if s.has_truststore:
        _load_truststore(ctx, s)
    else:
        ctx.load_default_certs()
    _load_keystore(ctx, s)
    return ctx


class ReloadingContext:
    """An SSL context rebuilt when the files it was built from change."""

    def __init__(self, settings: TlsSettings,
                 build: Callable[[TlsSettings], ssl.SSLContext] = server_context,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.settings = settings
        self._build = build
        self._clock = clock
        self._stamp = self._file_stamp()
        self._context = build(settings)   # a bad config fails here, at start-up
        self._next_check = clock() + RELOAD_CHECK_S
        self.reloads = 0

    def _file_stamp(self) -> tuple:
        stamp = []
        for f in self.settings.watched_files():
            try:
                st = os.stat(f)
                stamp.append((f, st.st_mtime_ns, st.st_size, st.st_ino))
            except OSError:
                stamp.append((f, None))
        return tuple(stamp)

    async def watch(self) -> None:
        """Check the files every RELOAD_CHECK_S even while no connection comes (until
        cancelled), so a renewal is logged when it lands."""
        while True:
            await asyncio.sleep(RELOAD_CHECK_S)
            self.current()

    @staticmethod
    def peer_principal(ssl_object: ssl.SSLObject | None) -> str:
        """The principal of a client that completed a handshake with this context (the
        server reaches TLS only through the context its listener was given)."""
        return peer_principal(ssl_object)

    def current(self) -> ssl.SSLContext:
        now = self._clock()
        if now >= self._next_check:
            self._next_check = now + RELOAD_CHECK_S
            stamp = self._file_stamp()
            if stamp != self._stamp:
                self._reload(stamp)
        return self._context

    def _reload(self, stamp: tuple) -> None:
        self._stamp = stamp   # reported once per change, not at every check
        try:
            context = self._build(self.settings)
        except (OSError, ssl.SSLError, TlsConfigError) as exc:
            # A half-written file is common while a secret is updated: keep serving with the
            # last good certificate until the files change again.
            log.warning("TLS files changed but do not load (%s); keeping the previous "
                        "certificate", exc)
            return
        self._context = context
        self.reloads += 1
        log.info("TLS key and certificates reloaded from %s",
                 ", ".join(self.settings.watched_files()))


def peer_principal(ssl_object: ssl.SSLObject | None) -> str:
    """Kafka's default principal of a TLS client: User:<subject DN> of its certificate, or
    User:ANONYMOUS without one."""
    cert = ssl_object.getpeercert() if ssl_object is not None else None
    subject = (cert or {}).get("subject")
    return principal_from_subject(subject) if subject else ANONYMOUS
