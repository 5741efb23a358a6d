"""`asynctrain init`: from a CSV folder and a target column to reviewed pipeline files (the
schema, `features.yaml`, drift thresholds and a pipeline config), drafted from a sample of the
data."""
