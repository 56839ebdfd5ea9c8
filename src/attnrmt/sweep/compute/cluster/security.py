"""Per-run TLS credentials (docs/cluster.md, "Security"): every scheduler, worker and client
of a run authenticates with a self-signed certificate and key made for that run
(:meth:`distributed.security.Security.temporary`), written to ``results/<run>/.dask/tls/``
(0700, files 0600, never logged) for batch workers and the owner's clients. Plain TCP and
TLS without that certificate are refused (``require_encryption``, mutual TLS)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from attnrmt.sweep.store.atomic import write_text_atomically

_TLS_DIRNAME = "tls"
_CERT_FILENAME = "cert.pem"
_KEY_FILENAME = "key.pem"
_PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def private_directory(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` (and parents) with the leaf at mode 0700, tightening an existing one."""
    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True, mode=_PRIVATE_DIR_MODE)
    os.chmod(directory, _PRIVATE_DIR_MODE)
    return directory


def write_private_file(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` atomically, created 0600 (never readable by others)."""
    return write_text_atomically(path, text, mode=PRIVATE_FILE_MODE, durable=False)


def credential_paths(dask_dir: str | os.PathLike[str]) -> tuple[Path, Path]:
    """(certificate, key) file paths of a run's credentials under ``.dask/``."""
    tls_dir = Path(dask_dir) / _TLS_DIRNAME
    return tls_dir / _CERT_FILENAME, tls_dir / _KEY_FILENAME


def _security_from_files(cert: str | os.PathLike[str], key: str | os.PathLike[str]) -> Any:
    """A mutual-TLS :class:`~distributed.security.Security` for every role from one pair (the
    certificate is its own CA)."""
    from distributed.security import Security

    cert_file, key_file = str(cert), str(key)
    return Security(
        require_encryption=True,
        tls_ca_file=cert_file,
        tls_client_cert=cert_file,
        tls_client_key=key_file,
        tls_scheduler_cert=cert_file,
        tls_scheduler_key=key_file,
        tls_worker_cert=cert_file,
        tls_worker_key=key_file,
    )


def new_run_credentials(dask_dir: str | os.PathLike[str]) -> Any:
    """Fresh credentials in ``dask_dir/tls`` and their Security. Cost: one RSA-2048 key."""
    from distributed.security import Security

    private_directory(dask_dir)
    cert_path, key_path = credential_paths(dask_dir)
    private_directory(cert_path.parent)
    temporary = Security.temporary()
    write_private_file(key_path, temporary.tls_client_key)
    write_private_file(cert_path, temporary.tls_client_cert)
    return _security_from_files(cert_path, key_path)


def run_security(dask_dir: str | os.PathLike[str]) -> Any:
    """The Security of a running cluster's credentials; FileNotFoundError without them."""
    cert_path, key_path = credential_paths(dask_dir)
    for path in (cert_path, key_path):
        if not path.is_file():
            raise FileNotFoundError(f"no Dask credentials at {path}: is the run's cluster up?")
    return _security_from_files(cert_path, key_path)


def in_memory_security() -> Any:
    """Credentials that never touch the disk (an in-process cluster of one job)."""
    from distributed.security import Security

    return Security.temporary()
