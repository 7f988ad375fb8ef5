"""Network fault planning: pure functions from faults to per-node iptables rules.

The model is a set of directed cuts (src, dst): packets from src are dropped on arrival at
dst, in dst's INPUT chain. That is exactly the iptables recipe of seed 002
(`iptables -A INPUT -s <other> -j DROP` on the isolated node), and it makes "heal a node"
mean what 002 means by it: remove the rules that live on that node. One direction dropped is
enough to break TCP both ways; a one-way cut still lets datagrams through the other way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import combinations

CLIENTS = "clients"  # pseudo-node: every client process
CHAIN = "BJ-NEMESIS"

Cut = tuple[str, str]


@dataclass(frozen=True)
class NetworkState:
    cuts: frozenset[Cut] = field(default_factory=frozenset)

    def with_cuts(self, cuts: Iterable[Cut]) -> NetworkState:
        return NetworkState(self.cuts | frozenset(cuts))

    def healed(self, nodes: Iterable[str] | None = None) -> NetworkState:
        """Without the rules that live on `nodes` (every node when None)."""
        if nodes is None:
            return NetworkState()
        on = set(nodes)
        return NetworkState(frozenset(c for c in self.cuts if c[1] not in on))

    def rules_on(self, node: str) -> list[str]:
        """Sources whose packets `node` drops, sorted."""
        return sorted(src for src, dst in self.cuts if dst == node)

    def can_reach(self, src: str, dst: str) -> bool:
        """Whether a TCP connection src -> dst can work (needs both directions)."""
        return (src, dst) not in self.cuts and (dst, src) not in self.cuts


def isolate(nodes: Iterable[str], all_nodes: Iterable[str]) -> set[Cut]:
    """Each of `nodes` drops what every other node sends it (clients still get through)."""
    everyone = list(all_nodes)
    return {(other, n) for n in nodes for other in everyone if other != n}


def partition(groups: Iterable[Iterable[str]], all_nodes: Iterable[str]) -> set[Cut]:
    """Nodes that share no group are cut apart both ways.

    Groups may overlap: [[a, b], [b, c]] is a bridge, b talks to both halves. A node in no
    group is a group of its own.
    """
    group_sets = [set(g) for g in groups]
    everyone = list(all_nodes)
    for n in everyone:
        if not any(n in g for g in group_sets):
            group_sets.append({n})
    cuts: set[Cut] = set()
    for a, b in combinations(everyone, 2):
        if not any(a in g and b in g for g in group_sets):
            cuts |= {(a, b), (b, a)}
    return cuts


def one_way(sources: Iterable[str], destinations: Iterable[str]) -> set[Cut]:
    dsts = list(destinations)
    return {(s, d) for s in sources for d in dsts if s != d}


def cut_clients(nodes: Iterable[str]) -> set[Cut]:
    """Clients can no longer reach these nodes; the nodes still see each other."""
    return {(CLIENTS, n) for n in nodes}


def iptables_restore_script(node: str, state: NetworkState, addresses: Mapping[str, str]) -> str:
    """`iptables-restore --noflush` input that sets node's chain to exactly its cuts.

    Declaring the chain flushes it, so applying is idempotent and atomic per node; only our
    own chain is touched, never Docker's nat rules.
    """
    lines = ["*filter", f":{CHAIN} - [0:0]", f"-A {CHAIN} -i lo -j RETURN"]
    for src in state.rules_on(node):
        lines.append(f"-A {CHAIN} -s {addresses[src]}/32 -j DROP")
    lines.append("COMMIT")
    return "\n".join(lines) + "\n"


def apply_command(script: str) -> str:
    """Shell command that loads `script` and makes sure INPUT jumps to our chain first."""
    quoted = script.replace("'", "'\"'\"'")
    return (
        f"printf '%s' '{quoted}' | iptables-restore --noflush && "
        f"(iptables -C INPUT -j {CHAIN} 2>/dev/null || iptables -I INPUT 1 -j {CHAIN})"
    )


def remove_command() -> str:
    """Shell command that removes our chain entirely (idempotent)."""
    return (
        f"while iptables -D INPUT -j {CHAIN} 2>/dev/null; do :; done; "
        f"iptables -F {CHAIN} 2>/dev/null; iptables -X {CHAIN} 2>/dev/null; true"
    )
