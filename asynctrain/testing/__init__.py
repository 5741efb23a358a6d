"""What tests and benches share: a local Spark cluster, an emulated cluster of unequal hosts, an
S3 endpoint (moto's server), generated taxi-like data, evaluation-output comparisons, a variant's
run in a child process with its peak memory.

The kit ships in the wheel, as `apache_beam.testing` does, so that users can test their own
pipelines with it: run their Beam stages on a local Spark cluster (`spark`), compare their
evaluation with stock TFMA's (`evaluation_outputs`). Benches and tests import it; the components and the
pipeline layer never do, and it imports no bench (`tools/import_graph.py`).
"""
