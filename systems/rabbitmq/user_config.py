"""A team's own rabbitmq.conf on a scenario (`harness run --config rabbitmq.conf`): its keys
become rabbitmq_conf, but for those the harness owns and those a typed knob of the scenario
already sets to other than its default (systems.config_files.knob_clash)."""

from __future__ import annotations

import yaml

from systems.config_files import ConfigFile, KeyFate, conflicts_error, knob_clash, taken
from systems.parsing import parse_as
from systems.rabbitmq.scenario import RabbitMQScenario, config_problems
from systems.rabbitmq.settings import owned_refusal, typed_knob
from systems.scenario import ScenarioError, scenario_data


def with_config_files(
    spec: RabbitMQScenario, files: list[ConfigFile], config_wins: bool = False
) -> tuple[RabbitMQScenario, list[KeyFate]]:
    """The scenario with the files' keys in its rabbitmq_conf, and every key's fate; a key whose
    typed knob the scenario set to other than its default stops the run unless --config-wins
    (systems.config_files.knob_clash)."""
    data = scenario_data(spec)
    fates: list[KeyFate] = []
    conflicts: list[str] = []
    chosen = set(spec.cluster.model_fields_set)
    conf = data["cluster"].setdefault("rabbitmq_conf", {})
    for f in files:
        if f.kind != "rabbitmq":
            raise ScenarioError(
                f"--config {f.path}: a Kafka {f.kind} file, and {spec.id} is RabbitMQ's"
            )
        for key, value in f.values.items():
            if owned := owned_refusal(key):
                why = f"the harness sets it ({owned})"
                fates.append(KeyFate(f.path, "rabbitmq_conf", key, value, "left out", why))
                continue
            knob = typed_knob(key, chosen)
            clash = (
                knob_clash(f.path, key, value, knob, spec.cluster, knob, config_wins)
                if knob
                else None
            )
            if clash is not None and clash.fate is None:
                conflicts.append(clash.why)
                continue
            if clash is not None:
                data["cluster"].pop(knob, None)
            conf[key] = value
            fates.append(taken(f.path, "rabbitmq_conf", key, value, clash))
    if conflicts:
        raise conflicts_error(conflicts)
    text = yaml.safe_dump(data, sort_keys=False)
    merged = parse_as(text, f"{spec.id} with --config", RabbitMQScenario, config_problems)
    return merged, fates
