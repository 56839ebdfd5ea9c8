"""Another user of the machine tries to use a run's Dask scheduler and read its files.

    python tests/harness/intruder.py USER SCHEDULER_ADDRESS FILE... > report.json

Started as root, it imports everything it needs, then drops to ``USER`` (setgroups,
setgid, setuid: from then on the kernel checks every file access and socket as that user)
and tries, printing one JSON report:

* ``files``: each FILE -> "read" or the error (e.g. PermissionError);
* ``plain_tcp``: run code on the scheduler over plain TCP (the scheduler's host:port);
* ``own_tls``: the same over TLS with a certificate of its own (Security.temporary());
* ``anonymous_tls``: a TLS connection without any certificate that trusts any server.

Each attempt is "ran" (the intruder ran code as the run's owner) or the error. It drops
privileges in-process because the interpreter and the venv may live where that user
cannot read them (a pyenv under /root, a clone in a 0700 home): every attempt is made
once as root first, so that every module the attempts import lazily (``tornado.platform``,
Dask's comms, ``ssl``) is loaded before the drop; those root attempts use no credential
and their results are discarded.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import ssl
import sys

from distributed import Client
from distributed.security import Security


def attempt(address: str, security: Security | None) -> str:
    """'ran' if code ran on the scheduler at ``address``, else the error."""
    try:
        with Client(address, security=security, timeout="5s", set_as_default=False) as client:
            client.run_on_scheduler(os.getpid)
        return "ran"
    except BaseException as exc:
        return f"{type(exc).__name__}: {exc}"[:300]


def anonymous_tls(address: str) -> str:
    """'connected' if a TLS client that shows no certificate (and trusts any server) gets
    a Dask connection that answers, else the error."""
    from distributed.comm import connect

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE

    async def identity() -> str:
        comm = await connect(address, timeout=5, ssl_context=context)
        try:
            await comm.write({"op": "identity"})
            await comm.read()
        finally:
            await comm.close()
        return "connected"

    try:
        return asyncio.run(identity())
    except BaseException as exc:
        return f"{type(exc).__name__}: {exc}"[:300]


def main(argv: list[str]) -> int:
    """Drop to the user, try, print the report."""
    user, address, *files = argv
    own_tls = Security.temporary()  # key generation needs imports: before the drop
    host_port = address.split("://", 1)[-1]
    attempts = {
        "plain_tcp": lambda: attempt(f"tcp://{host_port}", None),
        "own_tls": lambda: attempt(f"tls://{host_port}", own_tls),
        "anonymous_tls": lambda: anonymous_tls(f"tls://{host_port}"),
    }
    for warm_up in attempts.values():  # loads their lazy imports while files are readable
        warm_up()
    account = pwd.getpwnam(user)
    os.setgroups([])
    os.setgid(account.pw_gid)
    os.setuid(account.pw_uid)
    report: dict = {"uid": os.getuid(), "files": {}}
    for path in files:
        try:
            with open(path, "rb") as handle:
                handle.read(1)
            report["files"][path] = "read"
        except OSError as exc:
            report["files"][path] = type(exc).__name__
    report.update({name: run() for name, run in attempts.items()})
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
