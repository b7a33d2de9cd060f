"""Artifacts (immutable records of files a stage produced), the manifest builder and the typed manifest.json."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from pydantic import ConfigDict, Field, model_serializer

from edgekit.compile.result import CompileSignature
from edgekit.provenance import host_info, sha256_file, tool_versions, utc_now
from edgekit.results import JsonObject, Result, Section


class Artifact(Section):
    """A file produced (or consumed) by a stage. Stages never mutate their input."""

    format: str
    path: Path
    sha256: str
    stage: str
    parent_sha256: Optional[str] = None
    params: Dict[str, Any] = {}  # the producing stage's own settings (each stage records different ones)
    tools: Dict[str, str] = {}
    created: str = Field(default_factory=utc_now)

    @classmethod
    def from_file(
        cls,
        path: Path,
        *,
        format: str,
        stage: str,
        parent: "Artifact | None" = None,
        params: Mapping[str, Any] | None = None,
        tools: Mapping[str, str] | None = None,
    ) -> "Artifact":
        path = Path(path)
        return cls(
            format=format,
            path=path,
            sha256=sha256_file(path),
            stage=stage,
            parent_sha256=parent.sha256 if parent else None,
            params=dict(params or {}),
            tools=dict(tools if tools is not None else tool_versions()),
        )

    def relocated(self, new_path: Path) -> "Artifact":
        """The same artifact at another path (after an atomic move)."""
        return self.model_copy(update={"path": Path(new_path)})

    def recorded(self, relative_to: Path | None = None) -> "Artifact":
        """This artifact as manifest.json records it: its path relative to the manifest's folder when inside it."""
        if relative_to is None:
            return self
        try:
            return self.relocated(self.path.resolve().relative_to(Path(relative_to).resolve()))
        except ValueError:
            return self

    def to_json(self, relative_to: Path | None = None) -> JsonObject:
        return self.recorded(relative_to).to_dict()


class DataDescription(Section):
    """A data set as a command describes it: its path (when it has one), and the facts of its kind (items, seed,
    fingerprint, preprocessing, chunks, ...; see ``describe()`` of edgekit.calibration.dataset and edgekit.scale)."""

    model_config = ConfigDict(extra="allow")

    path: Optional[str] = None

    @model_serializer(mode="wrap")
    def _as_given(self, handler):
        return {k: v for k, v in handler(self).items() if k in self.model_fields_set or k in (self.model_extra or {})}


class HostInfo(Section):
    hostname: str
    platform: str
    machine: str
    python: str
    processor: str


CONTEXT = ("calibration", "data", "images", "calib", "live", "board", "signature")


class ManifestFile(Result):
    """every artifact one command wrote: path, sha256, lineage, host and tools"""

    SCHEMA = "manifest"

    edgekit_manifest: int = Field(1, description="format marker kept from before versioned schemas")
    command: str
    created: str
    host: HostInfo
    tools: Dict[str, str]
    artifacts: List[Artifact]
    # what the command ran on, per command (descriptions of data sets, whose keys depend on their kind)
    calibration: Optional[DataDescription] = Field(None, description="quantize: the calibration data")
    data: Optional[DataDescription] = Field(None, description="parity: the data compared on")
    images: Optional[DataDescription] = Field(None, description="preprocess-parity: the image set")
    calib: Optional[DataDescription] = Field(None, description="calib-check: the calibration set")
    live: Optional[DataDescription] = Field(None, description="calib-check: the live set")
    board: Optional[str] = Field(None, description="deploy: the board profile")
    signature: Optional[CompileSignature] = Field(None, description="compile: what the estimate depends on")

    def to_dict(self) -> JsonObject:
        """Context fields a command did not set are left out (each command sets its own)."""
        body = self.model_dump(mode="json")
        return {k: v for k, v in body.items() if v is not None or k not in CONTEXT}


@dataclass
class Manifest:
    """Collects what one command produced; ``write`` turns it into the typed ``ManifestFile``."""

    command: str
    artifacts: List[Artifact] = field(default_factory=list)
    extra: Mapping[str, object] = field(default_factory=dict)  # ManifestFile's context fields, checked by result()

    def add(self, artifact: Artifact) -> Artifact:
        self.artifacts.append(artifact)
        return artifact

    def result(self, relative_to: Path | None = None) -> ManifestFile:
        return ManifestFile(edgekit_manifest=1, command=self.command, created=utc_now(), host=host_info(),
                            tools=tool_versions(), artifacts=[a.recorded(relative_to) for a in self.artifacts],
                            **self.extra)

    def to_json(self, relative_to: Path | None = None) -> JsonObject:
        return self.result(relative_to).to_json()

    def write(self, path: Path) -> ManifestFile:
        path = Path(path)
        result = self.result(relative_to=path.parent)
        path.write_text(result.dumps())
        return result
