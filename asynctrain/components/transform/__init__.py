"""The Transform stage: a `preprocessing_fn` generated from a dataset's feature configuration.

Stock TFX `Transform` runs it (analyze on train, transform every split, analyzer cache on); this
package only holds what is ours: the feature configuration and the function built from it.
"""
