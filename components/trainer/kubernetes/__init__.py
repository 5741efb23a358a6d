"""Parameter-server training as a Training Operator TFJob: values file, manifest, client, a local
rehearsal of the replicas, and the executor's tfjob mode. Imports `cluster` and `training`."""
