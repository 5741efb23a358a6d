"""DriftValidator: today's data statistics against those of the served model's training data."""
