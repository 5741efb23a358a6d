"""The generated pages of docs/ (`asynctrain docs`): the configuration reference from the config
dataclasses, the benchmark tables from the committed results. Not pipeline code: nothing a run
does imports it."""
