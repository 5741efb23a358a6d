"""What tests and benches share: a local Spark cluster, generated taxi-like data, evaluation-output comparisons, runs in a fresh process."""
