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

Where a Ray version has no such switch the node falls back to Ray's default address and a
warning says so; Ray's token authentication (on by default in Ray 2.60, never turned
off here) then guards those ports. Joining a running cluster
(``arena.workers.ray_address``) does not come here: that is the explicit way out.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import Iterator
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


def start_local_ray(ray: Any, num_cpus: int) -> str:
    """Start a local Ray (no dashboard, the driver's logging left alone) whose processes
    listen on loopback only; returns the node's IP address (``127.0.0.1``)."""
    with _single_node_addressing() as switched:
        ray.init(
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
