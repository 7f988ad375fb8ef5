"""A scenario file's text read into one system's schema: its YAML, every problem of the file at
its line and column (the schema's, and each configuration key the system refuses), or the
scenario.

systems.registry picks the system a file names and reads it with these; a system's own modules
that make a scenario again (a team's files merged in: kafka/user_config, rabbitmq/user_config)
read it into their own schema the same way, without the registry of every system.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from systems.problems import (
    KeyProblem,
    Problem,
    in_file_order,
    located_problems,
    validation_problems,
    yaml_problem,
)
from systems.scenario import ScenarioError

M = TypeVar("M", bound=BaseModel)


def scenario_mapping(text: str, source: str) -> dict[str, Any]:
    """A scenario file's YAML, which must be a mapping of fields; a ScenarioError otherwise."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ScenarioError(yaml_problem(e).located(source)) from None
    except (ValueError, RecursionError) as e:  # an integer of thousands of digits, deep nesting
        raise ScenarioError(
            f"{source}: not a scenario YAML can hold ({type(e).__name__})"
        ) from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: expected a mapping of scenario fields")
    return data


def validated(
    text: str,
    data: dict[str, Any],
    source: str,
    scenario: type[M],
    config_problems: Callable[[object], list[KeyProblem]],
) -> M:
    """`data` (read from `text`) as a `scenario`, or a ScenarioError naming every problem of the
    file: the schema's, and each configuration key `config_problems` refuses."""
    problems = located_problems(text, config_problems(data))
    try:
        model = scenario.model_validate(data)
    except ValidationError as e:
        problems += validation_problems(e, scenario, text)
    if problems:
        raise _scenario_error(in_file_order(problems), source)
    return model


def parse_as(
    text: str,
    source: str,
    scenario: type[M],
    config_problems: Callable[[object], list[KeyProblem]],
) -> M:
    """A scenario file's text read into `scenario`, the schema of the system it names."""
    return validated(text, scenario_mapping(text, source), source, scenario, config_problems)


def _scenario_error(problems: list[Problem], source: str) -> ScenarioError:
    """One line naming the first problem and counting the rest; each problem located in the
    file for `harness validate` and `harness run`."""
    more = len(problems) - 1
    first = problems[0].summary(source) + (f" (and {more} more)" if more else "")
    return ScenarioError(first, [p.located(source) for p in problems])
