"""The cluster the loop trains on: servers (in-process, local processes, TF_CONFIG), the launcher
that picks one, and recovery from a lost parameter server. Imports `training`, never the reverse."""
