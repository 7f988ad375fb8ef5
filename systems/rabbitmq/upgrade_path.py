"""Which rolling upgrades RabbitMQ supports, judged from a scenario before it runs.

RabbitMQ's rolling upgrades go from one release series to the next, never past one ("Rolling
upgrades don't support skipping versions, except patch releases": 3.12 to 4.0 is refused, 3.13
to 4.0 is not), and never back. A node of the next series also needs the feature flags of the
series it leaves enabled: a cluster formed on a release starts with every stable flag of that
release on, but the flags a finished upgrade brings stay off until `enable_feature_flag all`
(a `finalize-feature` step with `feature: all`). A node started on a release whose required
flags are off refuses to boot, naming the first one.

The schedule is followed node by node: what each node may be running after each step (a step
aimed at a role, or one run with `unsupported_path: true`, may or may not have moved it), and
the series whose flags are all on. A step that RabbitMQ does not support is one line, unless it
says `unsupported_path: true` (then the run shows what the node does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from contract.versions import line_of, version_key

# RabbitMQ's release series, in order (its upgrade guide's table): each one's next is where a
# rolling upgrade from it may go. Past the table, the next minor of the same major.
SERIES = ("3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "4.0", "4.1", "4.2", "4.3")
# The first series with the Khepri metadata store (its khepri_db feature flag).
KHEPRI_SINCE = (3, 13)
UPGRADE_OPS = ("upgrade", "finalize-feature")
ALL_FLAGS = "all"
UNSUPPORTED_HINT = " (unsupported_path: true runs it, to see what the node does)"


class Step(Protocol):
    """What this reads of a RabbitMQ nemesis step."""

    @property
    def op(self) -> str: ...
    @property
    def nodes(self) -> list[str]: ...
    @property
    def release(self) -> str | None: ...
    @property
    def unsupported_path(self) -> bool: ...
    @property
    def feature(self) -> str | None: ...


def next_series(series: str) -> str:
    """The series a rolling upgrade from `series` may go to."""
    if series in SERIES[:-1]:
        return SERIES[SERIES.index(series) + 1]
    major, minor = version_key(series)[:2]
    return f"{major}.{minor + 1}"


def skipped(start: str, end: str) -> list[str]:
    """The series strictly between two (both in the table, else those the minors count)."""
    if start in SERIES and end in SERIES:
        return list(SERIES[SERIES.index(start) + 1 : SERIES.index(end)])
    (a_major, a_minor), (b_major, b_minor) = version_key(start)[:2], version_key(end)[:2]
    if a_major == b_major:
        return [f"{a_major}.{m}" for m in range(a_minor + 1, b_minor)]
    return [f"{a_major}.x" if a_major + 1 == b_major else f"{a_major + 1}-{b_major - 1}.x"]


def path_refusal(start: str, end: str, flags_through: str) -> str | None:
    """Why RabbitMQ does not support a rolling upgrade of a node from `start` to `end` (each a
    release or line) while the flags of `flags_through` (a series) are the last all on; None
    when it does."""
    a, b = line_of(start), line_of(end)
    patch_back = a == b and start.count(".") == end.count(".") == 2
    if version_key(b) < version_key(a) or (patch_back and version_key(end) < version_key(start)):
        return f"upgrade from {start} to {end} is a downgrade, which RabbitMQ does not support"
    if a == b:
        return None
    if b != next_series(a):
        return (
            f"RabbitMQ's rolling upgrades do not skip a series: {start} to {end} skips "
            f"{', '.join(skipped(a, b))}"
        )
    if version_key(flags_through) < version_key(a):
        return (
            f"upgrade from {a} to {b} needs {a}'s feature flags on first: a finalize-feature step "
            f"(feature: all) once every node runs {a}"
        )
    return None


def step_fields_refusal(
    op: str, release: str | None, feature: str | None, given: set[str]
) -> str | None:
    """An upgrade without its release, a finalize-feature without its feature, or either's
    field on another op; `given`: the fields the step set."""
    if op == "upgrade" and release is None:
        return 'upgrade needs release: the line or release the nodes move to (e.g. "4.0")'
    if op == "finalize-feature" and feature is None:
        return "finalize-feature needs feature: a feature flag (e.g. khepri_db), or all"
    for name, reader in (("release", "upgrade"), ("unsupported_path", "upgrade"),
                         ("feature", "finalize-feature")):  # fmt: skip
        if name in given and op != reader:
            return f"{name} is for {reader}, not {op}"
    return None


def upgrade_refusal(
    steps: Sequence[Step], version: str | None, own_image: bool, nodes: Sequence[str]
) -> str | None:
    """The first upgrade or finalize-feature step of the schedule RabbitMQ would not take,
    as one line (`nemesis.<i>: ...`); None when every one is supported. `version`: the
    cluster's (the release every node starts on); `nodes`: the cluster's. A target that is no
    node name (a role, a drawn node, an @label) may be any node."""
    upgrading = [i for i, s in enumerate(steps) if s.op in UPGRADE_OPS]
    if not upgrading:
        return None
    if version is None or own_image:
        i = upgrading[0]
        return (
            f"nemesis.{i}: {steps[i].op} needs cluster.version (the release the nodes start on, "
            "among the local images), not the default or an image of your own"
        )
    possible = {n: {version} for n in nodes}  # what each node may run, as the steps leave it
    flags_through = line_of(version)  # a new cluster turns every stable flag of its release on
    for i, step in enumerate(steps):
        if step.op == "finalize-feature":
            running = {line_of(r) for rs in possible.values() for r in rs}
            if step.feature == ALL_FLAGS:
                # Enabling all enables what every node supports: the oldest series' flags.
                flags_through = min(running, key=version_key)
            elif step.feature == "khepri_db" and max(map(version_key, running)) < KHEPRI_SINCE:
                newest = max(running, key=version_key)
                return f"nemesis.{i}: RabbitMQ {newest} has no khepri_db (3.13 on)"
            continue
        if step.op != "upgrade" or step.release is None:
            continue
        named = bool(step.nodes) and all(n in possible for n in step.nodes)
        targets = list(step.nodes) if named else list(nodes)
        if not step.unsupported_path:
            starts = sorted({r for n in targets for r in possible[n]}, key=version_key)
            for start in starts:
                if refusal := path_refusal(start, step.release, flags_through):
                    return f"nemesis.{i}: {refusal}{UNSUPPORTED_HINT}"
        for n in targets:
            # A role may or may not name the node; a node may refuse an unsupported path.
            sure = (named or not step.nodes) and not step.unsupported_path
            possible[n] = {step.release} if sure else possible[n] | {step.release}
    return None
