"""The Transform stage: a `preprocessing_fn` generated from a dataset's feature configuration.

Stock TFX `Transform` runs it (analyze on train, transform every split, analyzer cache on); this
package holds what is ours: the feature configuration and the function built from it, and stock's
component and executor with one change (`executor`: no TFX source package on a direct runner).
"""
