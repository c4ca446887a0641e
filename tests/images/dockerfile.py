"""A small Dockerfile reader for the image tests: instructions per build stage, as Docker reads them
(continuation lines joined, comments dropped). Not a full parser: enough for images/*/Dockerfile."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Instruction:
    keyword: str      # upper case: FROM, COPY, RUN, ...
    args: str         # the rest of the line, continuations joined

    def words(self) -> list[str]:
        """The arguments: a JSON array (exec form) or shell words."""
        if self.args.startswith("["):
            return [str(w) for w in json.loads(self.args)]
        return shlex.split(self.args)


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for i in self.all("ENV"):
            for word in i.words():
                key, _, value = word.partition("=")
                out[key] = value
        return out


@dataclass
class Dockerfile:
    args: dict[str, str]       # ARGs before the first FROM, with their defaults
    stages: list[Stage]

    @property
    def final(self) -> Stage:
        return self.stages[-1]

    def stage_args(self, stage: Stage) -> dict[str, str]:
        """The ARGs a stage declares, with their defaults."""
        out = {}
        for i in stage.all("ARG"):
            key, _, value = i.args.partition("=")
            out[key] = value
        return out


def read(path: Path) -> Dockerfile:
    lines: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") or not stripped:
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in lines:
        keyword, _, rest = line.partition(" ")
        instruction = Instruction(keyword.upper(), " ".join(rest.split()))
        if instruction.keyword == "FROM":
            words = instruction.words()
            base = words[0]
            for key, value in args.items():
                base = base.replace(f"${{{key}}}", value)
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(base, name))
        elif not stages:
            if instruction.keyword == "ARG":
                key, _, value = instruction.args.partition("=")
                args[key] = value
        else:
            stages[-1].instructions.append(instruction)
    return Dockerfile(args, stages)
