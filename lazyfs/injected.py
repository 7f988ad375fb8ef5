"""Disk faults injected into a running lazy filesystem: its calls fail with an errno the harness
chose (EIO for a failing disk, ENOSPC for a full one) until the harness clears them.

The control channel is one JSON file in the daemon's own store directory, `STORE/faults.json`,
which the harness replaces atomically (write beside it, rename over it) and the daemon re-reads
when it changed. A file rather than a Unix socket because:
- the daemon needs no server thread, protocol or connection handling, and the harness none of a
  daemon that is restarting (a power loss remounts it): the file is there before and after;
- a rename is atomic, so the daemon reads the old rules or the new, never half of either, and a
  rename makes a new inode, so a change is seen whatever the mtime's granularity;
- what is in effect can be read by anyone: `cat RUN_DIR/cluster/disks/<node>/store/faults.json`.
The cost of a file is latency: the daemon looks at it (one stat) at most every RECHECK_S, on a
call that comes after that long, so the hot path does no I/O; the harness waits SETTLE_S after
writing, so that when its step says the fault began (or ended), every later call sees it.

The daemon removes the file as it starts: a daemon that starts, fresh or after a power loss,
has no rules until the harness writes them again.

The file: `{"rules": [{"on": "write", "error": "EIO", "path": "*", "probability": 1.0}, ...],
"full": false, "torn": [{"path": "*.log", "keep": 0.5}]}`. A call fails with the errno of the
first rule on its kind of call whose glob matches its path (relative to the mount, fnmatch: `*`
spans directories) and whose draw, with its probability, says so. `full` makes statfs report no
space free, as a full disk's df does. `torn` fails no call: it is read when the daemon ends (a
power loss), and the last unsynced write of each file its first matching glob names is torn
rather than dropped (lazyfs.durable's `tear`). `rules` and `full` may be left out.
"""

from __future__ import annotations

import errno
import fnmatch
import json
import logging
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("lazyfs")

FAULTS = "faults.json"
RECHECK_S = 0.1
SETTLE_S = RECHECK_S + 0.05  # what the writer waits for every later call to see its rules
# The calls a rule can fail: write(2) and the like; fsync and fdatasync of a file or directory;
# read(2) that reaches the filesystem (not one the kernel's page cache answers); a new name
# (a file created, a directory, a symbolic link).
CALLS = ("write", "fsync", "read", "create")
ERRORS = ("EIO", "ENOSPC")


@dataclass(frozen=True)
class Rule:
    on: str  # one of CALLS
    error: str  # one of ERRORS
    path: str = "*"
    probability: float = 1.0

    def matches(self, on: str, path: str) -> bool:
        return on == self.on and fnmatch.fnmatchcase(path, self.path)

    @classmethod
    def parse(cls, data: object) -> Rule:
        """From the file's data; a ValueError of one line when it is not a rule."""
        keys = {"on", "error", "path", "probability"}
        if not isinstance(data, dict) or set(data) - keys or not {"on", "error"} <= set(data):
            raise ValueError(f"a rule is an object of on, error, path, probability: {data!r}")
        rule = cls(**data)
        if refusal := rule._refusal():
            raise ValueError(refusal)
        return rule

    def _refusal(self) -> str | None:
        if self.on not in CALLS:
            return f"a rule's on is one of {', '.join(CALLS)}, not {self.on!r}"
        if self.error not in ERRORS:
            return f"a rule's error is one of {', '.join(ERRORS)}, not {self.error!r}"
        if not isinstance(self.path, str) or not self.path:
            return f"a rule's path is a glob, not {self.path!r}"
        p = self.probability
        if isinstance(p, bool) or not isinstance(p, int | float):
            return f"a rule's probability is a number, not {p!r}"
        if not 0 < p <= 1:
            return f"a rule's probability is in (0, 1], not {p!r}"
        return None


SECTOR = 512  # what a torn write keeps is whole sectors, when it spans more than one


@dataclass(frozen=True)
class Torn:
    """At a power loss, the last unsynced write of the files matching `path` keeps a share
    `keep` of its bytes rather than none."""

    path: str = "*"
    keep: float = 0.5

    def kept(self, length: int) -> int:
        """How many bytes of a write of `length` survive: `keep` of it, rounded down to whole
        sectors when that is a sector or more, and always some but not all (a write of one
        byte cannot tear: none of it is kept)."""
        kept = int(length * self.keep)
        if kept >= SECTOR:
            kept -= kept % SECTOR
        return max(1, min(kept, length - 1)) if length > 1 else 0

    @classmethod
    def parse(cls, data: object) -> Torn:
        if not isinstance(data, dict) or set(data) - {"path", "keep"}:
            raise ValueError(f"a torn write is an object of path and keep: {data!r}")
        torn = cls(**data)
        if not isinstance(torn.path, str) or not torn.path:
            raise ValueError(f"a torn write's path is a glob, not {torn.path!r}")
        k = torn.keep
        if isinstance(k, bool) or not isinstance(k, int | float) or not 0 < k < 1:
            raise ValueError(f"a torn write's keep is a number in (0, 1), not {k!r}")
        return torn


@dataclass(frozen=True)
class Faults:
    """What a disk does wrong now; the empty one: nothing."""

    rules: tuple[Rule, ...] = ()
    full: bool = False  # statfs says no space is free
    torn: tuple[Torn, ...] = ()  # what a power loss tears rather than drops

    def __bool__(self) -> bool:
        return bool(self.rules) or self.full or bool(self.torn)

    def plus(self, other: Faults) -> Faults:
        """Both in effect: this one's rules first."""
        return Faults(self.rules + other.rules, self.full or other.full, self.torn + other.torn)

    def torn_keep(self, path: str) -> Torn | None:
        """The first torn-write rule whose glob matches the path (relative to the mount)."""
        return next((t for t in self.torn if fnmatch.fnmatchcase(path, t.path)), None)

    def as_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"rules": [asdict(r) for r in self.rules], "full": self.full}
        if self.torn:  # only when asked for: a file of rules alone reads as it always did
            data["torn"] = [asdict(t) for t in self.torn]
        return data

    @classmethod
    def parse(cls, data: object) -> Faults:
        """From the file's data; a ValueError of one line when it is not what this writes."""
        if not isinstance(data, dict) or set(data) - {"rules", "full", "torn"}:
            raise ValueError("the faults file is an object of rules, full and torn")
        rules, full = data.get("rules", []), data.get("full", False)
        torn = data.get("torn", [])
        if not isinstance(rules, list) or not isinstance(full, bool) or not isinstance(torn, list):
            raise ValueError("the faults file's rules and torn are lists, its full true or false")
        return cls(tuple(Rule.parse(r) for r in rules), full, tuple(Torn.parse(t) for t in torn))


def disk_error(on: str, path: str = "*", probability: float = 1.0) -> Faults:
    """A failing disk: that kind of call on those paths fails with EIO."""
    return Faults(
        (Rule.parse({"on": on, "error": "EIO", "path": path, "probability": probability}),)
    )


def disk_full() -> Faults:
    """A full disk: what needs space (a write, a new name) fails with ENOSPC, and statfs says
    nothing is free. What needs none goes on: reads, fsyncs (their data was written, so its
    blocks are allocated), opening a file that exists, truncation, unlinking."""
    return Faults((Rule("write", "ENOSPC"), Rule("create", "ENOSPC")), full=True)


def torn_write(path: str = "*", keep: float = 0.5) -> Faults:
    """Writes torn at a power loss: the last unsynced write of a matching file keeps `keep`."""
    return Faults(torn=(Torn.parse({"path": path, "keep": keep}),))


def write_faults(store: Path, faults: Faults) -> None:
    """Replaces the faults a store's daemon reads, atomically (see the module's docstring)."""
    tmp = store / (FAULTS + ".tmp")
    tmp.write_text(json.dumps(faults.as_data()))
    os.replace(tmp, store / FAULTS)


def read_faults(file: Path) -> Faults:
    """The faults the file says; none when there is no file."""
    try:
        text = file.read_text()
    except FileNotFoundError:
        return Faults()
    try:
        return Faults.parse(json.loads(text))
    except (ValueError, TypeError) as e:
        raise ValueError(f"{file}: {e}") from None


class Injector:
    """What the filesystem asks before each call it may fail: the errno to fail it with.

    Called from every FUSE thread: the rules are swapped whole, the draws and counts are made
    under a lock. `rng` and `clock` are the tests' to fix."""

    def __init__(
        self,
        file: Path,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.file = file
        self.rng = rng or random.Random()
        self.clock = clock
        self.faults = Faults()
        self.injected: Counter[str] = Counter()  # since the rules last changed, by "call errno"
        self._seen: tuple[int, int, int] | None = None  # the file's inode, mtime, size
        self._next_look = 0.0
        self._lock = threading.Lock()

    def error(self, on: str, path: str) -> int | None:
        """The errno a call `on` (one of CALLS) on `path` (relative to the mount) fails with,
        or None: it goes ahead."""
        faults = self.current()
        if not faults.rules:
            return None
        with self._lock:
            for rule in faults.rules:
                if rule.matches(on, path) and self.rng.random() < rule.probability:
                    self.injected[f"{on} {rule.error}"] += 1
                    code: int = getattr(errno, rule.error)
                    return code
        return None

    @property
    def full(self) -> bool:
        return self.current().full

    def current(self) -> Faults:
        """The rules in effect, looked for anew at most every RECHECK_S."""
        now = self.clock()
        if now < self._next_look:
            return self.faults
        with self._lock:
            if now >= self._next_look:
                self._next_look = now + RECHECK_S
                self._reload_if_changed()
        return self.faults

    def _reload_if_changed(self) -> None:
        try:
            st = os.stat(self.file)
            seen: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            seen = None
        if seen == self._seen:
            return
        self._seen = seen
        try:
            faults = read_faults(self.file)
        except ValueError as e:
            # A file that says nothing readable injects nothing: a fault must be one asked for.
            log.error("disk faults ignored: %s", e)
            faults = Faults()
        self._replace(faults)

    def _replace(self, faults: Faults) -> None:
        self.log_injected()
        log.warning("disk faults now: %s", json.dumps(faults.as_data()))
        self.faults = faults
        self.injected = Counter()

    def log_injected(self) -> None:
        """What was injected since the rules last changed, in the log: as they change again and
        as the filesystem is unmounted."""
        if self.injected:
            log.warning("disk faults injected until now: %s", dict(sorted(self.injected.items())))
