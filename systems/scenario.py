"""What every scenario file has, whatever its system: an id, what the configuration promises,
the client errors it must show, and the bound of each phase. Each system (systems/<name>/
scenario.py) adds its cluster, workload and nemesis steps; the ops a step may name are the fault
registry's.

A scenario is YAML validated with pydantic; an invalid one is reported as one line naming the
field, never as a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ValidationError,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from contract.expectations import known_expectation
from contract.numbers import parse_count
from contract.situations import known_situation
from faults.registry import System, check_op, ops_of
from faults.registry import op as fault
from systems.problems import did_you_mean


def _joined(value: object) -> object:
    return "+".join(str(v) for v in value) if isinstance(value, list) else value


Expectation = Annotated[
    str,
    BeforeValidator(_joined, json_schema_input_type=str | list[str]),
    AfterValidator(known_expectation),
]


def _count_word(value: object) -> object:
    return parse_count(value) if isinstance(value, str) else value


def _listed(value: object) -> object:
    return [value] if isinstance(value, str) else value


def _spelt(value: object) -> object:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


# What the JSON Schema lets an editor accept for a count: a number, or one written 60k or 1M.
CountWord = Annotated[str, Field(pattern=r"^[0-9_]+[kKmM]?$")]
# A number of messages, written as the README writes counts (3, 60k, 1M) or as a number.
MessageCount = Annotated[
    int,
    Field(ge=1, le=10_000_000),
    BeforeValidator(
        _count_word, json_schema_input_type=Annotated[int, Field(ge=1, le=10_000_000)] | CountWord
    ),
]
# Node names; one name may stand alone (`nodes: rabbit2`).
NodeNames = Annotated[list[str], BeforeValidator(_listed, json_schema_input_type=list[str] | str)]
# A setting whose words are numbers (`acks: 1`), read whether the file quotes it or not.
NumberWord = BeforeValidator(_spelt, json_schema_input_type=Literal["0", "1", "all", 0, 1])
Situation = Annotated[str, AfterValidator(known_situation)]


def _relative_glob(value: str) -> str:
    if not value or value.startswith("/") or ".." in value.split("/"):
        raise ValueError(
            f"path {value!r}: a glob relative to the data directory (no leading /, no ..)"
        )
    return value


# disk-error's arguments, as both systems' steps name them: which calls fail, on which files
# (a glob relative to the broker's data directory, lazyfs.injected), how often.
DiskCall = Literal["write", "fsync", "read"]
DiskGlob = Annotated[str, AfterValidator(_relative_glob)]
Probability = Annotated[float, Field(gt=0, le=1)]
# (Not `on`: YAML 1.1, PyYAML's, reads an unquoted `on` as true.)
# corrupt's (lazyfs.corrupt): how many files, how many bytes, where, how, from which seed, and
# whether the broker is stopped around it.
CorruptFiles = Annotated[int, Field(ge=1, le=100)]
CorruptLength = Annotated[int, Field(ge=1, le=1 << 20)]
CorruptHow = Literal["flip", "random", "zero"]
CorruptWhile = Literal["stopped", "running"]
Seed = Annotated[int, Field(ge=0, lt=1 << 63)]
# torn-write's: the share of the last unsynced write a power loss keeps (lazyfs.injected).
Keep = Annotated[float, Field(gt=0, lt=1)]
# The disk ops' own arguments (the step's field names), and the ops that read each.
DISK_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "fail_on": ("disk-error",),
    "probability": ("disk-error",),
    "path": ("disk-error", "corrupt", "torn-write"),
    "files": ("corrupt",),
    "length": ("corrupt",),
    "offset": ("corrupt", "clock"),
    "corruption": ("corrupt",),
    "seed": ("corrupt",),
    "while_": ("corrupt",),
    "keep": ("torn-write",),
}


# clock's argument, as both systems' steps name it: the nodes' clocks' offset from true time, in
# seconds (compose.clocks bounds it: a year either way).
MAX_CLOCK_OFFSET = 366 * 86400
# A step's offset: corrupt's byte position (a whole number, from the file's end when negative)
# or clock's seconds off true time (clock_refusal bounds it): one field, read by two ops.
StepOffset = int | Annotated[float, Field(allow_inf_nan=False)]


@dataclass(frozen=True)
class KnownOp:
    """A step's `op` (`Annotated[str, KnownOp("kafka")]`): one of the fault registry's ops for
    the system, which the JSON Schema lists so that an editor completes it."""

    system: System

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self._known, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {**handler(schema), "enum": list(ops_of(self.system))}

    def _known(self, name: str) -> str:
        try:
            return check_op(self.system, name)
        except ValueError as e:
            raise ValueError(f"{e}{did_you_mean(name, ops_of(self.system))}") from None


class ScenarioError(Exception):
    """A scenario file that cannot be used; the message is one line for the user. A file with
    several problems keeps each (`problems`, for `harness validate`); the message names the
    first and counts the rest."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or [message]


def read_user_file(path: Path, named: str) -> str:
    """A file the user gave (a scenario, a configuration file) as text, or one line saying why
    not, starting with `named`."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise ScenarioError(f"{named}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{named}: not UTF-8 text (byte {e.start})") from None


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Timeouts(Strict):
    cluster_up: Annotated[float, Field(gt=0, le=1800)] = 240.0
    """Seconds the cluster may take to start and answer."""
    workload: Annotated[float, Field(gt=0, le=7200)] = 600.0
    """Seconds the workload (producers, faults, readers' drain) may take."""
    recovery: Annotated[float, Field(gt=0, le=1800)] = 120.0
    """Seconds the cluster may take to heal after the last fault."""


class ErrorExpectation(Strict):
    """Clients must see this: at least one `f` outcome (send, commit, share-ack) that is not ok
    and whose error contains `error` (any error when empty)."""

    f: Literal["send", "commit", "share-ack"] = "send"
    """The outcome's kind: a send, a reader's offset commit, or a share consumer's
    acknowledgement (share-ack: InvalidRecordState when its record's lock had expired)."""
    error: str = ""
    """Text the error must contain (any error when empty)."""


class Generated(Strict):
    """Where a generated schedule came from (harness chaos, harness shrink): with it, the file
    says how to draw the same schedule again, and a run of it records its seed."""

    base: str  # the base scenario's id
    seed: int
    mode: str | None = None
    """Kafka: the mode the schedule was drawn for."""
    options: dict[str, Any] = Field(default_factory=dict)  # the generator's options
    shrunk_from: dict[str, Any] | None = None
    """harness shrink: the run it shrank, its steps, and how often this schedule reproduced."""


# What a chaos base's upgrade path holds: the one-way steps of an upgrade.
UPGRADE_PATH_OPS = ("upgrade", "finalize-feature")


class ChaosSettings(Strict):
    """What a chaos base says of the schedules drawn for it (harness chaos, the nightly)."""

    warmup: Annotated[float, Field(ge=0, le=3600)] = 0.0
    """Seconds of traffic before the first fault, at least: a workload that needs time before a
    fault can test anything (the exactly-once copiers' first transaction on a fresh cluster) says so
    here; the generator's own warmup applies when it is longer."""
    faults: (
        Annotated[list[Annotated[str, Field(pattern=r"^[a-z-]+$")]], Field(min_length=1)] | None
    ) = None
    """The fault families a schedule drawn for this base takes when `--faults` names none (as
    `--faults` would: e.g. [disk]); none: every default family the cluster fits. A base made for
    families drawn only by name (disk, membership, clock) says so here, so that its seed alone
    replays its schedule."""
    traffic: Annotated[float, Field(ge=0, le=3600)] = 0.0
    """Seconds of traffic a schedule drawn for this base gets at least (its producers send that
    long): a base whose one-way steps take longer than the night's two minutes (an upgrade path
    node by node, a migration's four phases) says so here; `--minutes` applies when longer."""
    upgrade_path: Annotated[list[dict[str, Any]], Field(min_length=1)] | None = None
    """The upgrade family's steps, in their order (each drawn once): `upgrade` and
    `finalize-feature` steps as a nemesis writes them, without `at`, e.g. [{op: upgrade, release:
    "4.4", within: 90}, {op: finalize-feature, feature: metadata.version, level: "4.4"}]. An
    upgrade naming no node is drawn one node at a time. The path, as a schedule of its own, must
    be one the system's schema takes (RabbitMQ: a supported path)."""

    @model_validator(mode="after")
    def _says_something(self) -> ChaosSettings:
        if not self.model_fields_set:
            raise ValueError(
                "an empty chaos block: give warmup (seconds before the first fault), faults "
                "(the families its schedules draw), traffic or upgrade_path"
            )
        for i, step in enumerate(self.upgrade_path or []):
            if step.get("op") not in UPGRADE_PATH_OPS:
                raise ValueError(
                    f"upgrade_path.{i}: op {step.get('op')!r}: the path holds "
                    f"{' and '.join(UPGRADE_PATH_OPS)} steps"
                )
            if "at" in step:
                raise ValueError(f"upgrade_path.{i}: no at: the generator draws when it runs")
        return self


class ScenarioBase(Strict):
    """What every scenario has; each system adds its cluster, workload and nemesis steps."""

    id: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]
    """The scenario's name: letters, digits and . _ - (its results folder)."""
    description: str = ""
    """One line saying what the scenario tests."""
    expect: Expectation
    """What the configuration promises: safe, loss, unavailable, duplicates, no-duplicates or
    reordered; duplicates and reordered, the only two that combine, as duplicates+reordered (or
    a list of both)."""
    expect_errors: list[ErrorExpectation] = Field(default_factory=list)
    """Client errors the run must show (each at least once)."""
    timeouts: Timeouts = Timeouts()
    """The bound of each phase."""
    claim: str | None = None
    """A row of the claims catalogue (docs/claims.md), e.g. R1; none for a scenario of your own."""
    requires: list[Situation] = Field(default_factory=list)
    """Situations the faults must bring about for a pass to count (contract.situations): a run that
    never reached one is inconclusive, never "safe"."""
    chaos: ChaosSettings | None = None
    """A chaos base's word on the schedules drawn for it."""
    cluster: Any
    """The cluster: its system, size, release and configuration."""
    workload: Any
    """The clients: who writes, who reads, and how."""
    nemesis: list[Any] = Field(default_factory=list)
    """The faults, in time order: each step names an op, when it starts and whom it hits."""
    generated: Generated | None = None
    """Where a generated schedule came from (written by harness chaos and harness shrink)."""

    def draws_targets(self) -> bool:
        """Whether the run draws as it goes: a step's targets, a client's mode (the run's seed
        then picks them)."""
        return False

    def uses_proxy(self) -> bool:
        """Whether a step faults the clients' path (delay, hold, blackhole, ...): the run then
        puts Toxiproxy between the workload's clients and the nodes."""
        return any(fault(step.op).needs_proxy for step in self.nemesis)

    @model_validator(mode="after")
    def _ordered(self) -> ScenarioBase:
        times = [step.at for step in self.nemesis]
        if times != sorted(times):
            raise ValueError("nemesis steps must be in time order")
        return self

    @model_validator(mode="after")
    def _upgrade_path_is_a_schedule(self) -> ScenarioBase:
        """A base's upgrade path, run as the whole schedule of the base, is one the system's
        schema takes: a drawn schedule holds a prefix of it (node by node), faults between."""
        path = self.chaos.upgrade_path if self.chaos is not None else None
        if not path:
            return self
        data = scenario_data(self)
        data.pop("chaos")
        data["nemesis"] = [{"at": float(i), **step} for i, step in enumerate(path)]
        try:
            type(self).model_validate(data)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(map(str, first["loc"])).replace("nemesis", "upgrade_path", 1)
            said = str(first["msg"]).removeprefix("Value error, ")
            said = said.replace("nemesis.", "upgrade_path.", 1)
            if where.startswith("upgrade_path"):
                said = f"{where}: {said}"
            elif not said.startswith("upgrade_path."):  # the cluster's word on the path
                said = f"upgrade_path: {where + ': ' if where else ''}{said}"
            raise ValueError(f"chaos.{said}") from None
        return self


def client_path_refusal(op: str, delay_ms: int, rate_kbit: int) -> str | None:
    """What a step of the clients' path lacks, in either system's steps."""
    if op == "delay" and not delay_ms:
        return "delay needs delay_ms (jitter_ms and both_ways are optional)"
    if op == "slow-link" and not rate_kbit:
        return "slow-link needs rate_kbit (both_ways is optional)"
    return None


def disk_refusal(op: str, fail_on: str | None, given: set[str]) -> str | None:
    """What a disk step lacks, or an argument of a disk op another op names; `given`: the
    fields the step set."""
    if op == "disk-error" and fail_on is None:
        return "disk-error needs fail_on: write, fsync or read (path and probability optional)"
    if op == "corrupt" and "path" not in given:
        # No default: corrupting every file a broker has is never what a finding needs.
        return "corrupt needs path: a glob of the broker's data files (e.g. '[!_]*/*.log')"
    for name, ops in DISK_ARGUMENTS.items():
        if name in given and op not in ops:
            readers = ", ".join(ops[:-1]) + f" or {ops[-1]}" if len(ops) > 1 else ops[0]
            return f"{name.rstrip('_')} is for {readers}, not {op}"
    return None


def clock_refusal(op: str, offset: float | None) -> str | None:
    """What a clock step lacks, or an offset out of its reach (the offset of other ops is
    disk_refusal's)."""
    if op == "clock" and offset is None:
        return "clock needs offset: seconds off true time, signed (+3600 ahead, -3600 behind)"
    if op == "clock" and offset is not None and abs(offset) > MAX_CLOCK_OFFSET:
        return f"clock's offset is at most {MAX_CLOCK_OFFSET} s (a year) either way, not {offset}"
    if op == "corrupt" and offset is not None and not isinstance(offset, int):
        return f"corrupt's offset is a byte position, a whole number, not {offset}"
    return None


def fake_clock_refusal(i: int, op: str, fake_clock: bool) -> str | None:
    """A clock step on a cluster whose nodes run on true time (docs/clock-faults.md)."""
    if fault(op).needs_fake_clock and not fake_clock:
        return (
            f"nemesis.{i}: {op} needs cluster.fake_clock: true (the nodes' clocks faked, "
            "docs/clock-faults.md)"
        )
    return None


class _Dumper(yaml.SafeDumper):
    """Each value written where it stands: no anchors and aliases (a heal repeats its fault's
    nodes) in a file a person reads."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def to_yaml(data: Any, header: list[str] | None = None) -> str:
    """A scenario (or part of one, as plain data) as YAML, with `header` as comment lines."""
    comments = "".join(f"# {line}\n" for line in header or [])
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=100)
    return comments + body


def scenario_data(scenario: ScenarioBase) -> dict[str, Any]:
    """What a scenario file holds: the fields it set, in the file's spelling (`from`)."""
    return scenario.model_dump(mode="json", by_alias=True, exclude_unset=True)
