"""Exporting a trained model to ONNX in the layout sherpa-onnx runs (rnnt.export.sherpa_onnx)."""
