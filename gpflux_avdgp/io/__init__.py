"""Models on disk: loading saved models with one-line errors (:mod:`.saving`) and exporting
them as TensorFlow SavedModels for serving (:mod:`.serving`)."""
