"""The configuration reference: every field of every config file documented, its allowed values
the ones the validators accept, and the page's rows as the dataclasses define them."""

import dataclasses

import pytest

from asynctrain.components.shared import yaml_config
from asynctrain.docs_generation import config_reference
from asynctrain.pipelines.config import PipelineConfig

PIPELINE_SECTIONS = list(config_reference.sections(PipelineConfig, 'config.yaml'))


def _nested_dict(path: str, value) -> dict:
    data = value
    for key in reversed(path.split('.')):
        data = {key: data}
    return data


def _choice_fields():
    for section in PIPELINE_SECTIONS:
        for field in section.fields:
            if field.allowed:
                yield section, field


def test_every_field_of_every_file_has_its_documentation():
    undocumented = [
        f'{file}: {section.path or "top level"}.{field.name}'
        for root, file, _ in config_reference.FILES
        for section in config_reference.sections(root, file)
        for field in section.fields
        if not field.doc
    ]

    assert undocumented == []


def test_the_pipeline_config_has_every_nested_section_once():
    paths = [section.path for section in PIPELINE_SECTIONS]

    assert paths == [
        '',
        'label',
        'example_gen',
        'trainer',
        'trainer.model',
        'trainer.training',
        'trainer.input',
        'trainer.distribution',
        'trainer.kubernetes',
        'trainer.task',
        'trainer.profile',
        'trainer.stale_gradients',
        'evaluation',
        'transform',
        'example_batcher',
        'retraining',
        'drift',
    ]


def test_a_field_row_holds_its_type_default_allowed_values_and_documentation():
    training = next(s for s in PIPELINE_SECTIONS if s.path == 'trainer.training')
    batch_size = next(f for f in training.fields if f.name == 'batch_size')
    optimizer = next(f for f in training.fields if f.name == 'optimizer')
    label = next(s for s in PIPELINE_SECTIONS if s.path == 'label')

    assert (batch_size.type, batch_size.default, batch_size.allowed) == ('int', '2048', ())
    assert batch_size.doc == 'Examples per step on each worker.'
    assert (optimizer.default, optimizer.allowed) == ('"adagrad"', ('adagrad', 'adam', 'sgd'))
    assert [(f.name, f.type, f.default) for f in label.fields] == [
        ('column', 'str', 'required'),
        ('task', 'str', 'required'),
        ('positive', 'str or int or null', 'null'),
        ('loss', 'str', '"mse"'),
    ]


@pytest.mark.parametrize(
    'section,field', list(_choice_fields()), ids=lambda x: getattr(x, 'path', None) or x.name
)
def test_the_allowed_values_are_exactly_what_the_config_accepts(section, field):
    path = f'{section.path}.{field.name}' if section.path else field.name
    # A label needs its column; a regression loss, the regression task.
    extra = {'label': {'column': 'y', 'task': 'regression'}} if path.startswith('label.') else {}

    def build(value):
        data = _nested_dict(path, value)
        if extra:
            data['label'] = {**extra['label'], **data['label']}
        if path == 'trainer.distribution.cluster' and value == 'tfjob':
            data['trainer']['kubernetes'] = {'image': 'registry/asynctrain:1'}
        if path == 'evaluation.confidence_interval_method':
            data['evaluation']['confidence_intervals'] = True  # a method needs its intervals
        return yaml_config.build(PipelineConfig, data)

    for value in field.allowed:
        config = build(value)
        found = config
        for key in path.split('.'):
            found = getattr(found, key)
        assert found == value
    with pytest.raises(yaml_config.ConfigError, match=f'^{path}: .*not-a-choice'):
        build('not-a-choice')


def test_attribute_docs_joins_continuation_lines_and_stops_at_the_block_end():
    @dataclasses.dataclass
    class Sample:
        """A sample.

        Attributes:
          first: One line.
          second: Starts here
            and goes on: `value`.

        Not an attribute: this paragraph.
        """

        first: int = 1
        second: str = ''

    assert config_reference.attribute_docs(Sample) == {
        'first': 'One line.',
        'second': 'Starts here and goes on: `value`.',
    }


def test_the_page_lists_each_section_and_links_nested_ones():
    page = config_reference.render()

    assert '### config.yaml: `trainer.training`' in page
    assert '### features.yaml: `features[]`' in page
    assert '### tfjob-values.yaml: `replicas.<key>`' in page
    assert (
        '| `trainer` | section: [TrainerConfig](#configyaml-trainer) |  |  | '
        "The Trainer's model, training, input pipeline and distribution settings. |"
    ) in page
    assert '| `batch_size` | int | `2048` |  | Examples per step on each worker. |' in page
