"""A labgrid place held by edgekit: connect to the coordinator, acquire (waiting up to a lock timeout, then
naming the holder), watch that the place's resources stay exported, build the labgrid target, release.

    with LabPlace("lab-an386", coordinator="127.0.0.1:20408") as place:
        place.acquire(timeout_s=60)            # DeviceBusyError naming who holds it after 60 s
        target = place.target(drivers)         # labgrid Target: RemotePlace + drivers from the factory
        ...
    # released on every way out of the block (exception, Ctrl-C)
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import Dict, List, Optional

from edgekit.boardlab.config import DriverConfig, PlaceRow
from edgekit.errors import DeviceError, DeviceNotFoundError, ToolMissingError, UserError

log = logging.getLogger(__name__)

# gRPC (labgrid's transport) prints an INFO line on every fork (QEMU, pyOCD subprocesses) unless told otherwise
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

DEFAULT_COORDINATOR = "127.0.0.1:20408"   # labgrid's own default
LOCK_POLL_S = 0.5
SYNC_TIMEOUT_S = 10.0
LABGRID_INSTALL = "pip install labgrid==26.0.1"


class DeviceBusyError(DeviceError):
    """The place stayed locked by someone else for the whole lock timeout."""


def coordinator_address(given: Optional[str]) -> str:
    """--coordinator, else LG_COORDINATOR (as labgrid's tools read it), else labgrid's default."""
    address = (given or os.environ.get("LG_COORDINATOR") or DEFAULT_COORDINATOR).strip()
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserError(f"coordinator address {address!r} is not HOST:PORT",
                        fix="pass --coordinator HOST:PORT (labgrid's default port is 20408) or set LG_COORDINATOR")
    return address


def _check_reachable(address: str, timeout_s: float) -> None:
    """Fail in seconds, with the address, when nothing listens there (gRPC alone would retry quietly)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise DeviceNotFoundError(f"the labgrid coordinator at {address} cannot be reached ({exc})",
                                  fix="start it (labgrid-coordinator), or pass --coordinator HOST:PORT / set "
                                      "LG_COORDINATOR to where it runs") from None


class LabPlace:
    """One place on one coordinator, held by this process between acquire() and release()."""

    def __init__(self, name: str, coordinator: Optional[str] = None, connect_timeout_s: float = 5.0) -> None:
        try:
            from labgrid.remote.client import start_session
        except ImportError:
            raise ToolMissingError("labgrid", LABGRID_INSTALL) from None
        self.name = name
        self.address = coordinator_address(coordinator)
        _check_reachable(self.address, connect_timeout_s)
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)  # grpc.aio binds its channel to the thread's current loop
        try:
            self.session = start_session(self.address, loop=self.loop)
        except Exception as exc:  # labgrid raises its own ServerError / grpc errors
            self.loop.close()
            raise DeviceNotFoundError(f"the labgrid coordinator at {self.address} refused the session: {exc}",
                                      fix="check that it is a labgrid-coordinator of a compatible version") from None
        self.acquired = False
        self.held_since: Optional[float] = None
        self._target = None

    # --- place records ---------------------------------------------------------------------------------------------
    @property
    def identity(self) -> str:
        return f"{self.session.gethostname()}/{self.session.getuser()}"

    def sync(self) -> bool:
        """Process the coordinator's pending updates; False when the coordinator connection is gone."""
        if self.session.stopping.is_set():
            return False
        try:
            return bool(self.loop.run_until_complete(asyncio.wait_for(self.session.sync_with_coordinator(),
                                                                      SYNC_TIMEOUT_S)))
        except (asyncio.TimeoutError, Exception) as exc:  # noqa: BLE001 - any failure means: not reachable
            log.debug("sync with the coordinator failed: %s", exc)
            return False

    def record(self):
        """The coordinator's record of the place (aliases resolved); unknown names list the known ones."""
        for place in self.session.places.values():
            if place.name == self.name or self.name in place.aliases:
                return place
        known = ", ".join(sorted(self.session.places)) or "none"
        raise DeviceNotFoundError(f"the coordinator at {self.address} has no place {self.name!r} (places: {known})",
                                  fix="check the name with `labgrid-client places`")

    @property
    def tags(self) -> Dict[str, str]:
        return dict(self.record().tags)

    # --- lock --------------------------------------------------------------------------------------------------------
    def acquire(self, timeout_s: float) -> None:
        """Acquire the place, waiting up to ``timeout_s`` while someone else holds it."""
        import grpc
        from labgrid.remote.generated import labgrid_coordinator_pb2

        deadline = time.monotonic() + max(0.0, timeout_s)
        announced = False
        while True:
            self.sync()
            place = self.record()
            if not place.acquired:
                try:
                    self.loop.run_until_complete(self.session.stub.AcquirePlace(
                        labgrid_coordinator_pb2.AcquirePlaceRequest(placename=place.name)))
                    self.acquired, self.held_since = True, time.monotonic()
                    self.sync()
                    log.info("acquired place %s on %s", place.name, self.address)
                    return
                except grpc.aio.AioRpcError as exc:
                    if exc.code() != grpc.StatusCode.FAILED_PRECONDITION:
                        raise DeviceError(f"the coordinator at {self.address} refused to lock place {place.name}: "
                                          f"{exc.details()}") from None
                    log.debug("lost the race for %s: %s", place.name, exc.details())
                    self.sync()
                    place = self.record()
                    if not place.acquired:  # resources held by another place, not a holder we can wait for
                        raise DeviceError(f"place {place.name} cannot be locked: {exc.details()}",
                                          fix="a resource it matches is held through another place; "
                                              "see `labgrid-client who`") from None
            if time.monotonic() >= deadline:
                since = time.strftime("%H:%M:%S", time.localtime(place.changed))
                raise DeviceBusyError(
                    f"place {place.name} is held by {place.acquired} (since {since}); waited {timeout_s:g} s",
                    fix=f"raise --lock-timeout to wait longer, or ask {place.acquired} to release it "
                        f"(labgrid-client -p {place.name} release)")
            if not announced:   # a warning: the user sees why nothing happens yet
                log.warning("place %s is held by %s; waiting up to %g s for it (--lock-timeout)", place.name,
                            place.acquired, timeout_s)
                announced = True
            self.loop.run_until_complete(asyncio.sleep(min(LOCK_POLL_S, max(0.0, deadline - time.monotonic()))))

    def release(self) -> None:
        """Release the place if this process holds it (never someone else's lock). Safe to call twice."""
        if self._target is not None:
            try:
                self._target.deactivate_all_drivers()
            except Exception as exc:  # noqa: BLE001 - releasing the lock matters more
                log.warning("deactivating the drivers of %s failed: %s", self.name, exc)
            self._target = None
        if not self.acquired:
            return
        from labgrid.remote.generated import labgrid_coordinator_pb2

        try:
            request = labgrid_coordinator_pb2.ReleasePlaceRequest(placename=self.record().name, fromuser=self.identity)
            self.loop.run_until_complete(asyncio.wait_for(self.session.stub.ReleasePlace(request), SYNC_TIMEOUT_S))
            log.info("released place %s", self.name)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not release place %s on %s: %s", self.name, self.address, exc)
        self.acquired = False

    # --- resources ---------------------------------------------------------------------------------------------------
    def missing_resources(self) -> List[str]:
        """Resources of the held place that are no longer exported (exporter gone or resource unavailable);
        ['coordinator connection'] when the coordinator itself is gone."""
        if not self.sync():
            return [f"the connection to the coordinator at {self.address}"]
        missing = []
        for exporter, group, cls, name in self.record().acquired_resources:
            entry = self.session.resources.get(exporter, {}).get(group, {}).get(name)
            if entry is None or not entry.data.get("avail"):
                missing.append(f"{exporter}/{group}/{cls}/{name}")
        return missing

    def target(self, drivers: List[DriverConfig]):
        """A labgrid Target for the held place: its RemotePlace resources plus ``drivers`` made by labgrid's
        factory (the environment-file form: [{"SerialDriver": {}}, {"EdgekitQemuBootstrapDriver": {...}}])."""
        from labgrid.factory import target_factory
        from labgrid.resource.remote import RemotePlaceManager

        import edgekit.boardlab.drivers  # noqa: F401  (registers our drivers in the factory)

        if not self.acquired:
            raise UserError(f"place {self.name} must be acquired before it is used")
        manager = RemotePlaceManager.get()
        manager.session, manager.loop = self.session, self.loop
        config = {"resources": [{"RemotePlace": {"name": self.record().name}}], "drivers": drivers}
        self._target = target_factory.make_target(self.record().name, config)
        return self._target

    def close(self) -> None:
        try:
            self.release()
        finally:
            try:
                self.loop.run_until_complete(self.session.stop())
                self.loop.run_until_complete(self.session.close())
            except Exception as exc:  # noqa: BLE001
                log.debug("closing the coordinator session: %s", exc)
            self.loop.close()
            asyncio.set_event_loop(None)

    def __enter__(self) -> "LabPlace":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def lab_places(coordinator: Optional[str]) -> List[PlaceRow]:
    """Every place of the lab: name, board tag, holder (None when free), whether all its resources are exported."""
    lab = LabPlace("", coordinator)
    try:
        lab.sync()
        rows: List[PlaceRow] = []
        for name, place in sorted(lab.session.places.items()):
            exported = all(lab.session.resources.get(e, {}).get(g, {}).get(r) is not None
                           and lab.session.resources[e][g][r].data.get("avail")
                           for e, g, _, r in place.acquired_resources) if place.acquired else None
            rows.append({"place": name, "board": place.tags.get("board"), "tags": dict(place.tags),
                         "holder": place.acquired, "resources_exported": exported,
                         "device": f"labgrid:{name}"})
        return rows
    finally:
        lab.close()
