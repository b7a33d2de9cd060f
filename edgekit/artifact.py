"""Artifacts (immutable records of files a stage produced) and the run manifest."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from edgekit.provenance import host_info, sha256_file, tool_versions, utc_now
from edgekit import schemas


@dataclass(frozen=True)
class Artifact:
    """A file produced (or consumed) by a stage. Stages never mutate their input."""

    format: str
    path: Path
    sha256: str
    stage: str
    parent_sha256: Optional[str] = None
    params: Mapping[str, Any] = field(default_factory=dict)
    tools: Mapping[str, str] = field(default_factory=dict)
    created: str = field(default_factory=utc_now)

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
        return Artifact(
            self.format, Path(new_path), self.sha256, self.stage, self.parent_sha256,
            self.params, self.tools, self.created,
        )

    def to_json(self, relative_to: Path | None = None) -> Dict[str, Any]:
        data = asdict(self)
        path = self.path
        if relative_to is not None:
            try:
                path = self.path.resolve().relative_to(Path(relative_to).resolve())
            except ValueError:
                path = self.path
        data["path"] = str(path)
        data["params"] = dict(self.params)
        data["tools"] = dict(self.tools)
        return data


@dataclass
class Manifest:
    """Everything one command produced: artifacts with lineage, host and tools."""

    command: str
    artifacts: List[Artifact] = field(default_factory=list)
    extra: Dict[str, Any] = field(default_factory=dict)

    def add(self, artifact: Artifact) -> Artifact:
        self.artifacts.append(artifact)
        return artifact

    def to_json(self, relative_to: Path | None = None) -> Dict[str, Any]:
        return {
            "edgekit_manifest": 1,
            "command": self.command,
            "created": utc_now(),
            "host": host_info(),
            "tools": tool_versions(),
            "artifacts": [a.to_json(relative_to) for a in self.artifacts],
            **self.extra,
        }

    def write(self, path: Path) -> None:
        path = Path(path)
        path.write_text(schemas.dumps("manifest", self.to_json(relative_to=path.parent)))
