"""The shapes of labgrid configuration edgekit writes (environment file, driver list) and of a lab place row."""
from __future__ import annotations

from typing import Dict, List, Optional, TypedDict, Union

# one driver of a target, in labgrid's environment-file form: {"SerialDriver": {"timeout": 10.0}}
DriverConfig = Dict[str, Dict[str, Union[str, float]]]


class TargetConfig(TypedDict):
    resources: List[Dict[str, Dict[str, str]]]   # [{"RemotePlace": {"name": PLACE}}]
    drivers: List[DriverConfig]


class EnvironmentOptions(TypedDict):
    coordinator_address: str


class EnvironmentConfig(TypedDict):
    """A labgrid environment file (usable with labgrid-client -c and pytest --lg-env)."""

    targets: Dict[str, TargetConfig]
    options: EnvironmentOptions


class PlaceRow(TypedDict):
    """One place of the lab as `edgekit devices --lab` lists it."""

    place: str
    board: Optional[str]                 # the place's board tag
    tags: Dict[str, str]
    holder: Optional[str]                # who holds it; None when free
    resources_exported: Optional[bool]   # None when the place has no resources
    device: str                          # labgrid:PLACE
