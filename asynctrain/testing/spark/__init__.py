"""A local Spark standalone cluster with Beam's Spark job server, to run Beam stages on Spark in a
test or a bench.

`cluster.SparkCluster` starts one on 127.0.0.1 (`python -m asynctrain.testing.spark.cluster DIR`
keeps one up); Maven fetches its Java side from `job_server/pom.xml` (`jars`); what an
application ran is read back from Spark's own records (`apps`); `probe` is a small Beam pipeline
that checks a cluster runs what TFX's Beam stages do; `process_groups` starts and stops the local
processes.
"""
