"""Workload families and their clients, per system and per client library: what runs against a
cluster and writes the history (plain produce/consume, transactional producers, the
exactly-once copy). The systems/ packages start, configure and break clusters and run these
clients as processes; a workload depends only on the history contract, never on a system."""
