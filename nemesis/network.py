"""Network fault planning: pure functions from faults to per-node iptables and tc rules.

The model is a set of directed cuts (src, dst): packets from src are dropped on arrival at
dst, in dst's INPUT chain. That is exactly the iptables recipe of the RabbitMQ reliability
article (`iptables -A INPUT -s <other> -j DROP` on the isolated node), and it makes "heal a
node" mean what that article means by it: remove the rules that live on that node. One
direction dropped is enough to break TCP both ways; a one-way cut still lets datagrams through
the other way.

Degraded links are the other kind of fault: a lossy link (src, dst) drops a share of what src
sends, also on arrival at dst (iptables' statistic match, in every kernel); a shaped link
(src, dst) delays or rate-limits what src sends to dst on src's egress (tc: an htb class per
link, with netem under it when a delay is asked for, which needs the kernel's sch_netem).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import combinations

CLIENTS = "clients"  # pseudo-node: every client process
CHAIN = "BJ-NEMESIS"

Cut = tuple[str, str]


@dataclass(frozen=True, order=True)
class LinkDegradation:
    """What happens to packets src sends dst: some dropped, delayed, or rate-limited."""

    src: str
    dst: str
    loss_pct: float = 0.0
    delay_ms: int = 0
    jitter_ms: int = 0
    rate_kbit: int = 0  # 0: no limit

    @property
    def shaped(self) -> bool:
        return bool(self.delay_ms or self.rate_kbit)


@dataclass(frozen=True)
class NetworkState:
    cuts: frozenset[Cut] = field(default_factory=frozenset)
    degraded: frozenset[LinkDegradation] = field(default_factory=frozenset)

    def with_cuts(self, cuts: Iterable[Cut]) -> NetworkState:
        return NetworkState(self.cuts | frozenset(cuts), self.degraded)

    def with_degraded(self, links: Iterable[LinkDegradation]) -> NetworkState:
        """Adds links; a link given again replaces what that (src, dst) had."""
        new = list(links)
        pairs = {(d.src, d.dst) for d in new}
        kept = frozenset(d for d in self.degraded if (d.src, d.dst) not in pairs)
        return NetworkState(self.cuts, kept | frozenset(new))

    def healed(self, nodes: Iterable[str] | None = None) -> NetworkState:
        """Without the rules that live on `nodes` (every node when None): cuts and losses live
        on the receiving node, shaping on the sending node."""
        if nodes is None:
            return NetworkState()
        on = set(nodes)
        return NetworkState(
            frozenset(c for c in self.cuts if c[1] not in on),
            frozenset(
                d
                for d in self.degraded
                if not (d.dst in on and d.loss_pct) and not (d.src in on and d.shaped)
            ),
        )

    def nodes_with_rules(self) -> set[str]:
        """Every node that holds an iptables or tc rule of ours."""
        return (
            {dst for _, dst in self.cuts}
            | {d.dst for d in self.degraded if d.loss_pct}
            | {d.src for d in self.degraded if d.shaped}
        )

    def rules_on(self, node: str) -> list[str]:
        """Sources whose packets `node` drops, sorted."""
        return sorted(src for src, dst in self.cuts if dst == node)

    def losses_on(self, node: str) -> list[LinkDegradation]:
        """Lossy links whose drops happen on arrival at `node`."""
        return sorted(d for d in self.degraded if d.dst == node and d.loss_pct)

    def shaped_from(self, node: str) -> list[LinkDegradation]:
        """Links `node` sends on that are delayed or rate-limited."""
        return sorted(d for d in self.degraded if d.src == node and d.shaped)

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


def degrade(
    sources: Iterable[str],
    destinations: Iterable[str],
    loss_pct: float = 0.0,
    delay_ms: int = 0,
    jitter_ms: int = 0,
    rate_kbit: int = 0,
) -> set[LinkDegradation]:
    dsts = list(destinations)
    return {
        LinkDegradation(s, d, loss_pct, delay_ms, jitter_ms, rate_kbit)
        for s in sources
        for d in dsts
        if s != d
    }


def iptables_restore_script(node: str, state: NetworkState, addresses: Mapping[str, str]) -> str:
    """`iptables-restore --noflush` input that sets node's chain to exactly its cuts.

    Declaring the chain flushes it, so applying is idempotent and atomic per node; only our
    own chain is touched, never Docker's nat rules.
    """
    lines = ["*filter", f":{CHAIN} - [0:0]", f"-A {CHAIN} -i lo -j RETURN"]
    for src in state.rules_on(node):
        lines.append(f"-A {CHAIN} -s {addresses[src]}/32 -j DROP")
    for link in state.losses_on(node):
        probability = f"{link.loss_pct / 100:.4f}"
        lines.append(
            f"-A {CHAIN} -s {addresses[link.src]}/32 "
            f"-m statistic --mode random --probability {probability} -j DROP"
        )
    lines.append("COMMIT")
    return "\n".join(lines) + "\n"


def apply_command(script: str) -> str:
    """Shell command that loads `script` and makes sure INPUT jumps to our chain first."""
    quoted = script.replace("'", "'\"'\"'")
    return (
        f"printf '%s' '{quoted}' | iptables-restore --noflush && "
        f"(iptables -C INPUT -j {CHAIN} 2>/dev/null || iptables -I INPUT 1 -j {CHAIN})"
    )


# The node's one network interface (containers on one compose network have one).
_IFACE = "dev=$(ip -o link show | awk -F': ' '$2 !~ /^lo/ {split($2, a, \"@\"); print a[1]; exit}')"
_NO_NETEM = "tc netem is not available in this kernel (sch_netem): use rate_kbit or loss_pct"


def tc_script(node: str, state: NetworkState, addresses: Mapping[str, str]) -> str:
    """Shell commands that set node's egress shaping to exactly its shaped links.

    The root qdisc is replaced, so applying is idempotent: an htb root whose default class is
    unlimited, and one class per shaped link, selected by destination address.
    """
    links = state.shaped_from(node)
    commands: list[str] = []
    if links:
        commands += [
            'tc qdisc add dev "$dev" root handle 1: htb default 1 r2q 1000',
            'tc class add dev "$dev" parent 1: classid 1:1 htb rate 10gbit',
        ]
    for i, link in enumerate(links, start=10):
        rate = f"{link.rate_kbit}kbit" if link.rate_kbit else "10gbit"
        commands.append(f'tc class add dev "$dev" parent 1: classid 1:{i} htb rate {rate}')
        if link.delay_ms:
            jitter = f" {link.jitter_ms}ms" if link.jitter_ms else ""
            commands.append(
                f'{{ tc qdisc add dev "$dev" parent 1:{i} handle {i}: '
                f"netem delay {link.delay_ms}ms{jitter} limit 100000 "
                f'|| {{ echo "{_NO_NETEM}" >&2; exit 3; }}; }}'
            )
        commands.append(
            f'tc filter add dev "$dev" protocol ip parent 1: prio 1 u32 '
            f"match ip dst {addresses[link.dst]}/32 flowid 1:{i}"
        )
    return f'{_IFACE}; tc qdisc del dev "$dev" root 2>/dev/null; ' + " && ".join(
        commands or ["true"]
    )


def remove_command() -> str:
    """Shell command that removes our chain and our shaping entirely (idempotent)."""
    return (
        f"while iptables -D INPUT -j {CHAIN} 2>/dev/null; do :; done; "
        f"iptables -F {CHAIN} 2>/dev/null; iptables -X {CHAIN} 2>/dev/null; "
        f'{_IFACE}; tc qdisc del dev "$dev" root 2>/dev/null; true'
    )
