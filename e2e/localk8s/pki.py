"""Certificates and keys for the local control plane, made with the openssl command line.

One CA signs every serving and client certificate; a separate RSA key pair signs service account
tokens. Everything lives in <state>/pki and is thrown away by `down`.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ClientCert:
    """A client identity: the certificate's CN is the user, each O a group."""

    name: str  # file stem
    cn: str
    groups: tuple[str, ...] = ()


# system:masters for the harness and the agent (which speaks for all nodes at once); the
# components get the identities the default RBAC bootstrap policy grants rights to.
CLIENTS = (
    ClientCert("admin", "rillet-e2e-admin", ("system:masters",)),
    ClientCert("agent", "rillet-node-agent", ("system:masters",)),
    ClientCert("controller-manager", "system:kube-controller-manager"),
    ClientCert("scheduler", "system:kube-scheduler"),
    ClientCert("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)),
)


def _openssl(*args: str, stdin: str | None = None) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, input=stdin, text=True,
                   timeout=60)


def _key(path: Path) -> None:
    _openssl("genrsa", "-out", str(path), "2048")
    os.chmod(path, 0o600)


def _sign(pki: Path, stem: str, subject: str, ext: str) -> None:
    """Key + CSR + certificate signed by the CA, with the extensions in `ext` (v3 config text)."""
    key, csr, crt, cnf = (pki / f"{stem}.{s}" for s in ("key", "csr", "crt", "cnf"))
    _key(key)
    cnf.write_text("[req]\ndistinguished_name=dn\n[dn]\n[ext]\n" + ext)
    _openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr))
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(pki / "ca.crt"), "-CAkey",
             str(pki / "ca.key"), "-CAcreateserial", "-days", "30", "-sha256", "-out", str(crt),
             "-extfile", str(cnf), "-extensions", "ext")
    csr.unlink()
    cnf.unlink()


def make_pki(pki: Path, server_ips: list[str], server_names: list[str]) -> None:
    """Creates CA, apiserver serving cert, client certs and the service-account key pair."""
    pki.mkdir(parents=True, exist_ok=True)
    if (pki / "done").exists():
        return
    _key(pki / "ca.key")
    _openssl("req", "-x509", "-new", "-key", str(pki / "ca.key"), "-subj", "/CN=rillet-e2e-ca",
             "-days", "30", "-sha256", "-out", str(pki / "ca.crt"))
    sans = ",".join([f"IP:{ip}" for ip in server_ips] + [f"DNS:{n}" for n in server_names])
    _sign(pki, "apiserver", "/CN=kube-apiserver",
          f"basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
          f"extendedKeyUsage=serverAuth\nsubjectAltName={sans}\n")
    # The agent's log endpoint (what the API server dials for `kubectl logs`) serves this one.
    _sign(pki, "kubelet", "/CN=rillet-node-agent-serving",
          f"basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
          f"extendedKeyUsage=serverAuth\nsubjectAltName={sans}\n")
    for c in CLIENTS:
        subject = "".join(f"/O={g}" for g in c.groups) + f"/CN={c.cn}"
        _sign(pki, c.name, subject,
              "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
              "extendedKeyUsage=clientAuth\n")
    _key(pki / "sa.key")
    _openssl("rsa", "-in", str(pki / "sa.key"), "-pubout", "-out", str(pki / "sa.pub"))
    (pki / "done").write_text("ok\n")
