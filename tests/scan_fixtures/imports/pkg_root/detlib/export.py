"""Imported by the package's __init__ but used by no training code: the scan never reads it
(this file is deliberately not Python, so reading it would leave a warning)."""
def export_onnx(model) ->
