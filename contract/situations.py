"""The situations a run's faults can bring about, by name: what the coverage of a run reports
(checkers.coverage) and what a scenario may require before its verdict counts (`requires:`).

A claim is only tested when its precondition happened: "a leader killed while the ISR was
below the replication factor" proves nothing in a run where no leader was ever hit.
"""

from __future__ import annotations

SITUATIONS: dict[str, str] = {
    "leader-faulted": (
        "a partition's leader was killed, stopped, paused, restarted, cut off, its disk faulted "
        "or its clock skewed"
    ),
    "leader-faulted-isr-shrunk": "a leader was faulted while its ISR was below the replicas",
    "leader-changed": "a partition's leader moved (a fail-over or an election)",
    "no-leader": "a partition had no leader",
    "isr-at-min-isr": "a partition's ISR was down to min.insync.replicas",
    "isr-below-min-isr": "a partition's ISR was below min.insync.replicas",
    "controller-faulted": "the controller or the control-plane quorum was faulted",
    "coordinator-faulted": "a transaction, group or share coordinator was faulted",
    "transaction-open-in-fault": "a transaction was open while a fault was in effect",
    "commit-in-flight-in-fault": "a transaction's commit (EndTxn) was in flight in a fault",
    "coordinator-moved-in-commit": "a client's coordinator moved while its commit was in flight",
    "fenced-transaction-open": (
        "a transaction was open when a newer instance of its transactional id initialised "
        "(a zombie, fenced)"
    ),
    "zombie-fenced-while-paused": (
        "a paused client had a transaction open when a newer instance of its transactional id "
        "initialised"
    ),
    "fenced-commit-asked": (
        "a transactional instance asked a commit after a newer instance of its transactional id "
        "had initialised (fencing it)"
    ),
    "request-held-past-end-txn": (
        "a transaction's produce or EndTxn request was held by the clients' proxy until after "
        "the transaction had ended (delivered late)"
    ),
    "commit-delayed": "a transaction's commit was asked while its coordinator's link was delayed",
    "share-lock-expired-redelivered": (
        "a share group's record was delivered again after its acquisition lock expired (its "
        "delivery unsettled, the redelivery a lock duration or more after it)"
    ),
    "share-released-redelivered": (
        "a share group's record was delivered again after its consumer's release was confirmed"
    ),
    "majority-down": "more than half of the brokers were down at once",
    "network-partitioned": "nodes were cut apart from each other",
    "clients-cut": "clients were cut from a node",
    "clients-delayed": (
        "clients' requests to a node were delayed, held, slowed or dropped (the proxy)"
    ),
    "client-paused": "a workload client process was paused (SIGSTOP)",
    "client-ended": "a workload client process was killed (SIGKILL) or stopped (SIGTERM)",
    "power-lost-unsynced-dropped": "a power loss dropped writes the disk had not synced",
    "node-faulted": "a node was killed, stopped, paused, restarted or lost power",
    "disk-faulted": "a node's disk failed its calls or tore its writes (disk-error, disk-full, "
    "torn-write)",
    "data-corrupted": "bytes of a node's data files were changed behind its back (corrupt)",
    "reassigned": "Kafka's replicas moved between brokers while the workload ran (reassign, "
    "remove-broker, add-broker)",
    "membership-changed": (
        "a broker left the cluster (remove-broker) or joined it (add-broker); a RabbitMQ node was "
        "taken out of the cluster (forget-node) or a queue's member removed (shrink-queue)"
    ),
    "quorum-changed": (
        "the KRaft controller quorum's voters changed: a controller added (add-controller) or "
        "removed (remove-controller)"
    ),
    "clock-skewed": "a node's clock was set off true time (clock)",
}


def known_situation(name: str) -> str:
    if name not in SITUATIONS:
        raise ValueError(f"{name!r} is not a situation (situations: {', '.join(SITUATIONS)})")
    return name
