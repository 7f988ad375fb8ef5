"""A team's own rabbitmq.conf on a scenario (`harness run --config rabbitmq.conf`): its keys
become rabbitmq_conf, but for those the harness owns and those a typed knob of the scenario
already sets, each left out with its reason."""

from __future__ import annotations

import yaml

from systems.config_files import ConfigFile
from systems.rabbitmq.scenario import RabbitMQScenario
from systems.rabbitmq.settings import owned_refusal, typed_knob
from systems.registry import parse_scenario
from systems.scenario import ScenarioError, scenario_data


def with_config_files(
    spec: RabbitMQScenario, files: list[ConfigFile]
) -> tuple[RabbitMQScenario, list[str]]:
    data = scenario_data(spec)
    notes: list[str] = []
    chosen = set(spec.cluster.model_fields_set)
    taken = data["cluster"].setdefault("rabbitmq_conf", {})
    for f in files:
        if f.kind != "rabbitmq":
            raise ScenarioError(
                f"--config {f.path}: a Kafka {f.kind} file, and {spec.id} is RabbitMQ's"
            )
        for key, value in f.values.items():
            if owned := owned_refusal(key):
                notes.append(f"{f.path}: {key} left out: the harness sets it ({owned})")
            elif knob := typed_knob(key, chosen):
                notes.append(f"{f.path}: {key} left out: the scenario sets {knob}")
            else:
                taken[key] = value
    merged = parse_scenario(yaml.safe_dump(data, sort_keys=False), f"{spec.id} with --config")
    assert isinstance(merged, RabbitMQScenario)
    return merged, notes
