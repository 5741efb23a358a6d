"""Parameter-server training as a Training Operator TFJob. `values` (the values file), `tfjob`
(the manifest, its DNS-label names and the operator's TF_CONFIG), `client` (submit, wait, cancel),
`local` (the replicas as processes on one machine) and `training` (the executor's tfjob mode).
Imports `cluster` and `training`, never the reverse."""
