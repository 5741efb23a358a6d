"""What 2.17's driver does to a container task's command and args before the launcher sees them
(kubeflow/pipelines `backend/src/v2/driver/driver.go` `initPodSpecPatch`, `driver/util.go`
`resolveContainerArgs`, first in 2.17.0): every `{{$.inputs.parameters['x']}}` filled with the
value's text as `pbValueToString` writes it, every `IfPresent` clause resolved to its branch, an
element naming `$.outputs` left to the launcher. Earlier lines hand them to the launcher as
compiled (`kfp_profiles.KfpProfile.driver_fills_input_parameters`).
"""

from __future__ import annotations

import decimal
import json
import re
from typing import Any

import numpy

from asynctrain.pipelines.kubeflow.compile import compiled_pipeline
from asynctrain.pipelines.kubeflow.local_backend import kfp_profiles

# `v2/driver/util.go` `fullInputParameterRe` (2.17.0).
_INPUT_PARAMETER = re.compile(r"\{\{\$\.inputs\.parameters\['(.+?)'\]\}\}")


def _go_g(number: float) -> str:
    """Go's `fmt.Sprintf("%g", n)`: the shortest digits that read back, in exponent form when
    the exponent is below -4 or at least 6 (`strconv` `%e`: a sign and at least two digits)."""
    shortest = decimal.Decimal(repr(abs(number)))  # repr: the shortest digits that read back
    exp = shortest.adjusted()
    sign = '-' if number < 0 else ''
    if exp < -4 or exp >= 6:
        digits = ''.join(map(str, shortest.as_tuple().digits)).rstrip('0') or '0'
        head = digits[0] + ('.' + digits[1:] if len(digits) > 1 else '')
        return f'{sign}{head}e{"-" if exp < 0 else "+"}{abs(exp):02d}'
    return sign + numpy.format_float_positional(abs(number), unique=True, trim='-')


def integral(value: Any) -> Any:
    """A list or struct value as Go's `AsInterface` and `json.Marshal` write it: a whole float
    as an integer."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [integral(v) for v in value]
    if isinstance(value, dict):
        return {k: integral(v) for k, v in value.items()}
    return value


def driver_text(value: Any) -> str:
    """`pbValueToString` (`v2/driver/util.go`, 2.17.0): a parameter value as the driver writes it
    into a command line: a whole number without a fraction, any other `%g`; a list or struct as
    Go's `json.Marshal` (keys sorted, `<`, `>`, `&` escaped)."""
    if value is None:
        return ''
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (int, float)):
        if float(value).is_integer() and abs(value) < 2**63:
            return str(int(value))
        return _go_g(float(value))
    if isinstance(value, (list, dict)):
        text = json.dumps(
            integral(value), separators=(',', ':'), sort_keys=True, ensure_ascii=False
        )
        return text.replace('<', '\\u003c').replace('>', '\\u003e').replace('&', '\\u0026')
    return str(value)


def _filled(text: str, parameters: dict[str, Any]) -> str:
    """`resolveInputParameterPlaceholders`: every input parameter placeholder in `text`.

    Raises:
      ValueError: a parameter the ExecutorInput lacks (the driver's message).
    """

    def value(match: re.Match) -> str:
        if match.group(1) not in parameters:
            raise ValueError(f'parameter "{match.group(1)}" not found in executor input')
        return driver_text(parameters[match.group(1)])

    return _INPUT_PARAMETER.sub(value, text)


def _if_present(text: str, parameters: dict[str, Any]) -> list[str]:
    """`resolveCondition`: an `IfPresent` clause's `Then` where its input has a non-null value,
    else its `Else`, each filled; nothing where that branch is absent.

    Raises:
      ValueError: the clause does not parse or a branch holds a non-string (the driver's words).
    """
    try:
        clause = json.loads(text)['IfPresent']
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f'failed to parse IfPresent JSON: {e}') from e
    present = parameters.get(clause.get('InputName')) is not None
    branch = clause.get('Then') if present else clause.get('Else')
    if branch is None:
        return []
    if isinstance(branch, str):
        return [_filled(branch, parameters)]
    if not isinstance(branch, list):
        raise ValueError(f'unexpected type in IfPresent Then/Else: {type(branch).__name__}')
    for item in branch:
        if not isinstance(item, str):
            raise ValueError(f'non-string item in IfPresent Then/Else array: {type(item).__name__}')
    return [_filled(item, parameters) for item in branch]


def container_arguments(elements: list[str], parameters: dict[str, Any]) -> list[str]:
    """`resolveContainerArgs` (`v2/driver/util.go`, 2.17.0): an element naming `$.outputs` kept
    for the launcher, an `IfPresent` clause resolved to its branch, any other filled.

    Raises:
      ValueError: the driver's message ("failed to resolve ...").
    """
    resolved = []
    for element in elements:
        if '$.outputs' in element:
            resolved.append(element)
        elif element.strip().startswith('{"IfPresent":'):
            try:
                resolved += _if_present(element, parameters)
            except ValueError as e:
                raise ValueError(f'failed to resolve condition: {e}') from e
        else:
            try:
                resolved.append(_filled(element, parameters))
            except ValueError as e:
                raise ValueError(f'failed to resolve input parameters: {e}') from e
    return resolved


def pod_container(
    container: compiled_pipeline.ContainerSpec,
    parameters: dict[str, Any],
    profile: kfp_profiles.KfpProfile,
) -> compiled_pipeline.ContainerSpec:
    """The container as the driver's pod spec hands it to the launcher (`driver.go`
    `initPodSpecPatch`): from 2.17 a copy with its command and args through
    `container_arguments`; before, as compiled.

    Raises:
      ValueError: "failed to resolve container command/args: ..." (2.17's driver fails the task).
    """
    if not profile.driver_fills_input_parameters:
        return container
    resolved = compiled_pipeline.ContainerSpec()
    resolved.CopyFrom(container)
    for field in ('command', 'args'):
        try:
            elements = container_arguments(list(getattr(container, field)), parameters)
        except ValueError as e:
            raise ValueError(f'failed to resolve container {field}: {e}') from e
        del getattr(resolved, field)[:]
        getattr(resolved, field).extend(elements)
    return resolved
