"""The identity a model carries of its pipeline: written into the model, read back, fingerprinted
by the schema's content, and what refuses a model."""

from __future__ import annotations

import json

import pytest
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from asynctrain.components.shared import model_identity
from asynctrain.components.shared.model_identity import ModelIdentity

SCHEMA = 'feature { name: "a" type: INT }\nfeature { name: "b" type: BYTES }\n'


def test_the_identity_is_written_into_the_model_as_json_and_read_back(tmp_path):
    identity = ModelIdentity('penguins-species', 'Species', '0123456789abcdef')
    path = model_identity.attach(identity, str(tmp_path / 'model'))
    assert path == str(tmp_path / 'model' / 'assets.extra' / 'pipeline_identity.json')
    assert json.loads(open(path).read()) == {
        'pipeline_name': 'penguins-species',
        'label': 'Species',
        'schema_fingerprint': '0123456789abcdef',
    }
    assert ModelIdentity.from_json(open(path).read()) == identity
    with pytest.raises(ValueError, match='not a model identity'):
        ModelIdentity.from_json('{"pipeline_name": "x"}')


def test_the_schema_fingerprint_is_the_contents_not_the_text(tmp_path):
    plain = tmp_path / 'plain.pbtxt'
    plain.write_text(SCHEMA)
    commented = tmp_path / 'commented.pbtxt'
    commented.write_text('# proto-file: x\n# reviewed\n' + SCHEMA.replace('\n', '\n\n'))
    changed = tmp_path / 'changed.pbtxt'
    changed.write_text(SCHEMA.replace('BYTES', 'FLOAT'))

    fingerprint = model_identity.schema_file_fingerprint(str(plain))
    assert len(fingerprint) == 16 and int(fingerprint, 16) >= 0
    assert model_identity.schema_file_fingerprint(str(commented)) == fingerprint
    assert model_identity.schema_file_fingerprint(str(changed)) != fingerprint
    assert (
        model_identity.schema_fingerprint(text_format.Parse(SCHEMA, schema_pb2.Schema()))
        == fingerprint
    )


def test_a_model_is_refused_for_another_pipeline_another_label_or_none_not_another_schema():
    own = ModelIdentity('penguins-species', 'Species', '0123456789abcdef')
    assert model_identity.refusal(own, own) is None
    assert (
        model_identity.refusal(own, ModelIdentity('penguins-species', 'Species', 'f' * 16)) is None
    )
    assert model_identity.refusal(own, ModelIdentity('diabetes-target', 'target', 'a' * 16)) == (
        "it was pushed by pipeline 'diabetes-target' (label 'target')"
    )
    assert model_identity.refusal(own, ModelIdentity('penguins-species', 'Island', 'a' * 16)) == (
        "it was trained for label 'Island'"
    )
    assert model_identity.refusal(own, None) == (
        'it carries no pipeline identity (pushed before asynctrain recorded one)'
    )
