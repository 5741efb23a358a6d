"""The learning tasks every component agrees on: their names, the regression losses, and the
vocabulary a multiclass label's ids index. Transform derives the label by them, the Trainer
builds its head by them, and the pipeline config validates against them."""

TASK_TYPES = ('binary', 'multiclass', 'regression')
# The vocabulary a multiclass label's ids index (Transform's `vocab_filename`): its class names,
# one a line, line i being class id i; its order is the class order the Trainer trains and serves.
LABEL_VOCABULARY = 'label_classes'
# `msle`: the squared error of log(1 + label), for a non-negative label with a long right tail
# (prices, counts); the prediction is turned back into the label's units (exp(x) - 1).
REGRESSION_LOSSES = ('mse', 'huber', 'msle')
