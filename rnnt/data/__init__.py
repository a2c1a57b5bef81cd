"""The on-the-fly data pipeline: audio, features and batches."""
