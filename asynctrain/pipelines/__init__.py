"""asynctrain's pipeline definition, its runners (local, Kubeflow) and the command line."""
