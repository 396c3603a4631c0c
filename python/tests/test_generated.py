"""The protobuf/gRPC modules are generated from proto/, never edited by
hand: the package under test must match a fresh generation byte for byte,
and so must any modules generated into the source tree."""

import filecmp
import os
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import generate  # noqa: E402

sys.path.pop(0)


def _generated(dir_: str):
    return sorted(n for n in os.listdir(dir_)
                  if n.endswith(("_pb2.py", "_pb2_grpc.py")) or n == "_stamp.py")


def _compare(dir_: str) -> list:
    with tempfile.TemporaryDirectory() as fresh:
        try:
            generate.generate_modules(fresh)
        except generate.GenerateError as e:
            pytest.skip(f"cannot generate: {e}")
        want = _generated(fresh)
        have = _generated(dir_)
        problems = [f"missing: {n}" for n in want if n not in have]
        problems += [f"not generated from proto/: {n}" for n in have if n not in want]
        problems += [f"stale or edited: {n}" for n in want
                     if n in have and not filecmp.cmp(os.path.join(fresh, n),
                                                      os.path.join(dir_, n), shallow=False)]
        return problems


def test_the_package_under_test_matches_proto(sf):
    import sandfence.v1
    from sandfence.v1 import _stamp
    v1 = os.path.dirname(sandfence.v1.__file__)
    assert _stamp.PROTO_SHA256 == generate.proto_hash(), (
        f"{v1} was generated from other .proto files than {generate.proto_dir()}: "
        "rebuild the package")
    assert _compare(v1) == [], f"{v1}: rebuild the package (pip install) or run generate.py"


def test_modules_in_the_source_tree_are_fresh_if_present():
    v1 = os.path.join(os.path.dirname(HERE), "sandfence", "v1")
    if not any(n.endswith("_pb2.py") for n in os.listdir(v1)):
        pytest.skip("no modules generated into python/sandfence/v1 (nothing to go stale)")
    assert _compare(v1) == [], "run python3 python/generate.py"


def test_a_changed_proto_is_detected(tmp_path):
    # The check itself can fail: a copy of proto/ with one comment added
    # hashes differently.
    import shutil
    copy = tmp_path / "proto"
    shutil.copytree(generate.proto_dir(), copy)
    f = copy / "sandfence" / "v1" / "daemon.proto"
    f.write_text(f.read_text() + "\n// changed\n")
    assert generate.proto_hash(str(copy)) != generate.proto_hash()
