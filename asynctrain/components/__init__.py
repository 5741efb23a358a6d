"""asynctrain's custom TFX components, one folder each with TFX's three roles (spec, component,
executor). Code more than one of them reads lives in `shared`, the one way between them."""
