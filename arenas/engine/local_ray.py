"""A Ray started for one machine's run, with every port on the loopback interface.

Ray chooses the address its processes listen on from the node's IP address: the GCS
server and the raylet listen on 127.0.0.1 only when the node's IP is 127.0.0.1, and on every
interface otherwise; workers and the driver follow the node's IP. On Linux,
``ray.init(_node_ip_address="127.0.0.1")`` is no help: ``ray.init`` replaces a loopback
address with the machine's own one (so that other nodes could reach it). Ray keeps a local
node on loopback only where it does not support clusters (Windows, macOS: its switch is
``ray._private.ray_constants.ENABLE_RAY_CLUSTER``, read when the node's IP is resolved).
`start_local_ray` turns that switch off for the one ``ray.init`` that starts the
local node and restores it after: the node's IP is then 127.0.0.1 and every GCS, raylet,
worker and driver port listens on loopback (``docs/guide/selfplay-scale-and-solver.md``,
"What listens", lists them; ``tests/test_selfplay_ray.py`` checks the sockets).

``ray.init()`` with no address joins the newest cluster ``ray start`` made on this machine
(or ``RAY_ADDRESS``); `start_local_ray` asks for ``address="local"``, a new node of its own.

Where a Ray version has no such switch the node falls back to Ray's default address and a
warning says so; Ray's token authentication (on by default in Ray 2.60, never turned
off here) then guards those ports. Joining a running cluster
(``arena.workers.ray_address``) does not come here: that is the explicit way out.

Ray writes the token it generates for a new local cluster (``~/.ray/auth_token``) with the
process's umask, readable by every user of the machine (0644), and reads an existing one
as it finds it. `private_token_file` makes that file the owner's only (0600) before
``ray.init`` reads it: it writes the token itself when there is none (Ray then uses it) and
tightens one that an earlier run or an older Ray left readable.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import secrets
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger("paddlecraft")

#: the addresses of the loopback interface as a listening socket reports them (an IPv6
#: socket bound to 127.0.0.1 shows the IPv4-mapped form)
LOOPBACK = frozenset({"127.0.0.1", "::1", "::ffff:127.0.0.1"})
_SWITCH_MODULE = "ray._private.ray_constants"
_SWITCH = "ENABLE_RAY_CLUSTER"


@contextlib.contextmanager
def _single_node_addressing() -> Iterator[bool]:
    """Ray's cluster switch off for the duration (True), or untouched when this Ray has
    none (False). The previous value comes back on exit, whatever happened."""
    try:
        constants = importlib.import_module(_SWITCH_MODULE)
    except ImportError:
        constants = None
    if constants is None or not hasattr(constants, _SWITCH):
        yield False
        return
    before = getattr(constants, _SWITCH)
    setattr(constants, _SWITCH, False)
    try:
        yield True
    finally:
        setattr(constants, _SWITCH, before)


def private_token_file(environ: Mapping[str, str] | None = None) -> Path | None:
    """The token file a new local Ray reads, made readable by its owner only (0600).

    With token authentication on (``RAY_AUTH_MODE`` unset, Ray's default, or ``token``) and
    no ``RAY_AUTH_TOKEN`` in the environment, Ray reads ``RAY_AUTH_TOKEN_PATH`` or
    ``~/.ray/auth_token``: a missing file is created with a fresh random token (256 bits,
    as Ray makes them) in an owner-only folder, an existing one is set to 0600. Returns the
    file, or None where Ray reads no file (authentication off, or the token in the
    environment).
    """
    env = os.environ if environ is None else environ
    if env.get("RAY_AUTH_MODE", "token").lower() != "token" or env.get("RAY_AUTH_TOKEN"):
        return None
    path = Path(env.get("RAY_AUTH_TOKEN_PATH") or Path.home() / ".ray" / "auth_token")
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        try:
            os.chmod(path, 0o600)
        except PermissionError:  # another user's file: say so, Ray still reads it
            log.warning("Ray's token file %s is not yours and may be readable by others", path)
        return path
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    return path


def start_local_ray(ray: Any, num_cpus: int) -> str:
    """Start a local Ray (no dashboard, the driver's logging left alone) whose processes
    listen on loopback only, its token file private (`private_token_file`); returns the
    node's IP address (``127.0.0.1``)."""
    private_token_file()
    with _single_node_addressing() as switched:
        ray.init(
            address="local",  # a new node: never the cluster `ray start` left (or RAY_ADDRESS)
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            num_cpus=num_cpus,
        )
    node_ip = str(ray.util.get_node_ip_address())
    if node_ip not in LOOPBACK:
        log.warning(
            "local Ray listens on %s, not only on loopback (%s); Ray's token "
            "authentication guards its ports",
            node_ip,
            "this Ray version has no single-node switch" if not switched else "Ray chose it",
        )
    return node_ip
