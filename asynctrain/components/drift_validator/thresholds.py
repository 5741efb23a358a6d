"""How far a feature's distribution may move before it counts as drift: the comparators' names,
the default thresholds and their checks. No TensorFlow or TFDV here, so that a pipeline's
configuration is checked before either is imported (`asynctrain run` refuses a bad config first).
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Mapping

from tensorflow_metadata.proto.v0 import schema_pb2

JENSEN_SHANNON = 'jensen_shannon_divergence'
L_INFINITY = 'l_infinity'

# A day's sample of unchanged data moves a category's share or a histogram by a few hundredths;
# a tenth is a shift a person would want to look at before the model trains on it.
DEFAULT_NUMERIC_THRESHOLD = 0.1
DEFAULT_CATEGORICAL_THRESHOLD = 0.1


def check_threshold(name: str, value: float) -> float:
    """`value` as a float when it is a distance threshold in (0, 1], else a ValueError naming
    `name`. Both distances lie in [0, 1]: 1 turns a comparison off, 0 would flag any noise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise ValueError(f'{name}: expected a number in (0, 1], got {value!r}')
    if not 0 < value <= 1:
        raise ValueError(f'{name}: expected a threshold in (0, 1], got {value!r}')
    return float(value)


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """How far a feature's distribution may move before it counts as drift.

    Attributes:
      numeric: Jensen-Shannon divergence allowed for numeric features, in (0, 1].
      categorical: L-infinity distance (largest change of one value's share) allowed for
        categorical features, in (0, 1].
      features: Per-feature thresholds, overriding the two defaults whichever comparator the
        feature gets; names must be schema features (`check_features`).
    """

    numeric: float = DEFAULT_NUMERIC_THRESHOLD
    categorical: float = DEFAULT_CATEGORICAL_THRESHOLD
    features: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, 'numeric', check_threshold('numeric', self.numeric))
        object.__setattr__(self, 'categorical', check_threshold('categorical', self.categorical))
        if not isinstance(self.features, Mapping):
            raise ValueError(
                f'features: expected a mapping of feature name to threshold, got {self.features!r}'
            )
        features = {}
        for name, value in self.features.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f'features: expected feature names, got {name!r}')
            features[name] = check_threshold(f'features[{name!r}]', value)
        object.__setattr__(self, 'features', types.MappingProxyType(features))

    def for_feature(self, feature: str, comparator: str) -> float:
        """The threshold of `feature` compared with `comparator`."""
        if feature in self.features:
            return self.features[feature]
        return self.categorical if comparator == L_INFINITY else self.numeric


def check_features(thresholds: Thresholds, schema: schema_pb2.Schema) -> None:
    """Raises a ValueError when `thresholds.features` names a feature the schema lacks."""
    known = sorted(feature.name for feature in schema.feature)
    unknown = sorted(set(thresholds.features) - set(known))
    if unknown:
        raise ValueError(
            f'feature thresholds name {", ".join(map(repr, unknown))}, not in the schema; '
            f'its features are: {", ".join(known)}'
        )
