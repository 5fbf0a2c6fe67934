"""The b2store command: the quickstart checks its embedded samples; info and decode work."""

import numpy as np

import b2store
from b2store.cli import main


def test_quickstart_decodes_and_verifies_the_samples(capsys):
    assert main(["quickstart"]) == 0
    out = capsys.readouterr().out
    assert out.count("sha256 matches") == 2 and "DIFFERS" not in out
    assert "version 2, LZ4" in out and "BYTEDELTA(4)" in out


def test_info_and_decode(tmp_path, capsys):
    data = np.arange(1000, dtype="<i4").view(np.uint8)
    chunk = bytes([2, 1, 0x13, 4]) + (4000).to_bytes(4, "little") * 2 + (4016).to_bytes(4, "little")
    path = tmp_path / "c.bin"
    path.write_bytes(chunk + data.tobytes())
    assert main(["info", str(path)]) == 0
    assert "version 2" in capsys.readouterr().out
    out = tmp_path / "out.raw"
    assert main(["decode", str(path), "-o", str(out)]) == 0
    assert out.read_bytes() == data.tobytes()


def test_corrupt_file_is_reported_not_raised(tmp_path, capsys):
    path = tmp_path / "bad.bin"
    path.write_bytes(b"\x02\x01\x02\x04" + b"\x10\x00\x00\x00" * 2 + b"\x00\x01\x00\x00")
    assert main(["info", str(path)]) == 2
    assert "b2store: cbytes" in capsys.readouterr().err
    assert isinstance(b2store.FormatError("x", "y", 1), ValueError)
