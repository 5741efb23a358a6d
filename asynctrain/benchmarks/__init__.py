"""Side-by-side benchmarks behind `asynctrain bench ...`: ours against the reference, one run."""
