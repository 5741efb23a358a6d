"""`asynctrain train`'s flags, declared once.

`TrainArguments` is both the command line of one `asynctrain train` run and the value the
Kubernetes code passes around: each field that is a flag carries its name and help in
`dataclasses.field(metadata=...)`, from which `add_arguments` builds the parser (`cli.py`, and the
TFJob printer `python -m asynctrain.components.trainer.kubernetes.tfjob`) and `to_argv` builds the argv every
TFJob replica runs. Imports nothing from the project, so `kubernetes/` can use it without
importing the CLI.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

# The `asynctrain` subcommand these arguments belong to.
SUBCOMMAND = 'train'
# The layout under `--output` when `--serving-model-dir` and `--model-run-dir` are not given: the
# Model artifact's `model/Format-Serving` and the ModelRun artifact's `model_run`.
MODEL_SUBDIR = 'model'
MODEL_RUN_SUBDIR = 'model_run'
SERVING_SUBDIR = 'Format-Serving'

_FLAG = 'flag'
_HELP = 'help'
_REQUIRED = 'required'


def _flag(name: str, help: str, *, required: bool = False, default: Any = None) -> Any:
    """A field that is the command-line flag `name`; `required` is what argparse enforces."""
    metadata = {_FLAG: name, _HELP: help, _REQUIRED: required}
    return dataclasses.field(default=default, metadata=metadata)


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainArguments:
    """The paths and settings of one `asynctrain train` run; the same for every TFJob replica.

    Fields are in the order `to_argv` writes their flags.

    Attributes:
      examples: URI of the transformed Examples artifact the trainer reads (`Split-train/`,
        `Split-eval/`).
      transform_graph: URI of the Transform graph artifact.
      output: URI under which the chief writes `model/Format-Serving` and `model_run/`; may be
        empty when `serving_model_dir` and `model_run_dir` are both given.
      serving_model_dir: Where the chief exports the serving SavedModel, overriding
        `<output>/model/Format-Serving` (the Trainer's executor passes the Model artifact's).
      model_run_dir: Where summaries, checkpoints and the training report go, overriding
        `<output>/model_run` (the executor passes the ModelRun artifact's URI).
      config: Path or URI of the YAML file the trainer reads its settings from; None for the
        defaults.
      label_key: The transformed label feature; required (the CLI has no default label). None
        only so that leaving it out is a ValueError naming the field, like the output check.
      base_model: A serving SavedModel directory to warm-start from; None for none.
      profile_steps: `N:K`: capture a profiler trace of the workers over K global steps from
        step N (overrides the config's `trainer.profile`); None for the config's.
      extra_args: Further `asynctrain train` flags the caller adds, passed through unchanged
        (not a flag itself).
    """

    examples: str = _flag(
        '--examples',
        'Transformed examples directory with Split-train/ and Split-eval/.',
        required=True,
        default=dataclasses.MISSING,
    )
    transform_graph: str = _flag(
        '--transform-graph',
        "Transform's output directory (transform_fn/, transformed_metadata/).",
        required=True,
        default=dataclasses.MISSING,
    )
    output: str | None = _flag(
        '--output',
        'Output directory: model/Format-Serving/ and model_run/. Required unless '
        '--serving-model-dir and --model-run-dir are both given.',
    )
    serving_model_dir: str | None = _flag(
        '--serving-model-dir',
        f'Where the serving SavedModel goes (default: <output>/{MODEL_SUBDIR}/{SERVING_SUBDIR}).',
    )
    model_run_dir: str | None = _flag(
        '--model-run-dir',
        f'Summaries, checkpoints and training_report.json (default: <output>/{MODEL_RUN_SUBDIR}).',
    )
    config: str | None = _flag(
        '--config',
        'YAML file: a pipeline config with a "trainer:" section, or the section alone. Defaults '
        'apply to whatever it leaves out.',
    )
    label_key: str | None = _flag(
        '--label-key', "Transformed label feature (the dataset's label name).", required=True
    )
    base_model: str | None = _flag(
        '--base-model', 'A serving SavedModel directory to warm-start from.'
    )
    profile_steps: str | None = _flag(
        '--profile-steps',
        'N:K: capture a tf.profiler trace of the workers over K steps from global step N, '
        "under the model run's plugins/profile/ (TensorBoard's Profile tab); overrides "
        'trainer.profile.',
    )
    extra_args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.output and not (self.serving_model_dir and self.model_run_dir):
            raise ValueError(
                'output: required unless serving_model_dir and model_run_dir are both '
                f'given, got output={self.output!r}, serving_model_dir='
                f'{self.serving_model_dir!r}, model_run_dir={self.model_run_dir!r}'
            )
        if not self.label_key:
            raise ValueError(f'label_key: expected a feature name, got {self.label_key!r}')
        if self.profile_steps:
            parse_profile_steps(self.profile_steps)

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> TrainArguments:
        """The arguments `add_arguments` parsed into `args` (other attributes are ignored)."""
        return cls(**{f.name: getattr(args, f.name) for f in _flag_fields()})

    def to_argv(self) -> list[str]:
        """`train` and its flags, as `asynctrain` takes them; flags not given are left out."""
        argv = [SUBCOMMAND]
        for f in _flag_fields():
            value = getattr(self, f.name)
            if value:
                argv += [f.metadata[_FLAG], value]
        return [*argv, *self.extra_args]


def parse_profile_steps(text: str) -> tuple[int, int]:
    """`--profile-steps N:K` as (start step N, number of steps K).

    Raises:
      ValueError: `text` is not two integers N >= 0 and K >= 1 separated by a colon.
    """
    start, sep, count = text.partition(':')
    if sep and start.strip().isdigit() and count.strip().isdigit() and int(count) >= 1:
        return int(start), int(count)
    raise ValueError(
        f'--profile-steps: expected N:K (start at global step N >= 0, capture K >= 1 steps), '
        f'got {text!r}'
    )


def _flag_fields() -> tuple[dataclasses.Field, ...]:
    return tuple(f for f in dataclasses.fields(TrainArguments) if _FLAG in f.metadata)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds one argument per flag of `TrainArguments` to `parser`, its `dest` the field's name."""
    for f in _flag_fields():
        parser.add_argument(
            f.metadata[_FLAG],
            dest=f.name,
            required=f.metadata[_REQUIRED],
            default=None,
            help=f.metadata[_HELP],
        )
