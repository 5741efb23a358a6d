"""A component's execution properties as its executor's `Do` receives them, for tests and benches
that call an executor directly instead of through a pipeline run.

A component holds a parameter declared `ExecutionParameter(use_proto=True)` as a proto message
(most, like CsvExampleGen's `output_config`, already as its JSON); TFX's launcher hands every
proto to the executor as JSON, which is what an executor parses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tfx.dsl.components.base import base_component


def exec_properties(component: base_component.BaseComponent) -> dict[str, Any]:
    """`component.exec_properties` with every proto message written as JSON, as the launcher
    passes them to the executor (`tfx.utils.proto_utils.proto_to_json`)."""
    from tfx.utils import proto_utils

    return {
        key: proto_utils.proto_to_json(value) if hasattr(value, 'DESCRIPTOR') else value
        for key, value in component.exec_properties.items()
    }


def csv_example_gen_properties(input_dir: str, schema_path: str | None = None) -> dict[str, Any]:
    """Our CsvExampleGen's execution properties for the CSV files of `input_dir`, typed by the
    schema at `schema_path` (None: types inferred), with every other setting its default."""
    from asynctrain.components.example_gen import component

    return exec_properties(component.CsvExampleGen(input_base=input_dir, schema_path=schema_path))
