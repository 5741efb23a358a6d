"""The training core, one replica's view and the loop around it: data, model, task, loop, run
files and export. It imports neither `cluster` nor `kubernetes`."""
