"""The sandfence API's protobuf and gRPC modules, generated from proto/ by
python/generate.py (the package build runs it); never edited by hand."""
