"""asynctrain's custom TFX components: ExampleGen, Transform preprocessing, Trainer."""
