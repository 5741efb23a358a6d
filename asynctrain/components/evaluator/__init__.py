"""asynctrain's Evaluator: TFMA's evaluation and blessing of the exported model, scored in large
batches."""
