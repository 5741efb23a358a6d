"""The custom properties DriftValidator records on its anomalies output: what the Evaluator reads
to withhold a blessing (`BLOCKING_PROPERTY`, `DRIFTED_FEATURES_PROPERTY`) and what a run's summary
reports."""

# JSON list of {feature, comparator, distance, threshold, absent_from}, unaccepted drift only
# (distance null for a feature absent on one side; see `drift_validator.comparison.Drift`).
DRIFTED_FEATURES_PROPERTY = 'drifted_features'
# JSON list of the names of the drifted features accepted for this run.
ACCEPTED_FEATURES_PROPERTY = 'accepted_features'
# The previous statistics compared with ('' on a first run).
COMPARED_WITH_PROPERTY = 'compared_with'
# 1 when there was nothing to compare with, 0 otherwise.
FIRST_RUN_PROPERTY = 'first_run'
# Why a first run: '' when compared, `NO_MODEL` or `NO_MODEL_STATISTICS`.
FIRST_RUN_REASON_PROPERTY = 'first_run_reason'
NO_MODEL = 'no_model'  # no model pushed yet (or no baseline_model input)
NO_MODEL_STATISTICS = 'no_model_statistics'  # pushed before models carried their statistics
# 1 when unaccepted drift exists: the Evaluator withholds its blessing under `NO_PUSH`.
BLOCKING_PROPERTY = 'blocking'
