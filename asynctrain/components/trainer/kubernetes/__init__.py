"""Parameter-server training as a Training Operator TFJob: `values` (the values file), `names`
(the DNS-label rule), `tfjob` (the manifest and the operator's TF_CONFIG), `client` (submit, wait,
cancel), `local` (the replicas as processes on one machine) and `training` (the executor's tfjob
mode). Imports `cluster` and `training`, never the reverse."""
