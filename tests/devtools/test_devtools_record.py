"""The compile record: `mcu build --record` writes it, a fresh process loads it without
the model file and reproduces `mcu profile`'s op table from it and the saved events."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile

import pytest

from mcu.devtools.record import load_record
from mcu.errors import McuError
from repo import EXAMPLES, requires_qemu

BOARD = "mps2-an505"

_FRESH = """
import json, sys
from mcu.devtools.record import load_record, profile_from_record
record = load_record(sys.argv[1])
print(profile_from_record(record, json.load(open(sys.argv[2]))).table())
ep = record.exported_program()
print("EXPORTED", type(ep).__name__, sum(1 for n in ep.graph.nodes if n.op == "call_function"))
"""


@requires_qemu
def test_record_reproduces_the_profile_in_a_fresh_process(tmp_path, capsys) -> None:
    from mcu.commands.cli import main

    model = tmp_path / "small_cnn.py"
    shutil.copy(EXAMPLES / "small_cnn.py", model)
    record, events = tmp_path / "small_cnn.mcurec", tmp_path / "events.json"
    assert main(["build", "--board", BOARD, "-q", "int8", str(model), "-o", str(tmp_path / "out"),
                 "--record", str(record)]) == 0
    assert main(["profile", "--board", BOARD, "-q", "int8", str(model), "--events", str(events)]) == 0
    table = capsys.readouterr().out.split("profile: ", 1)[1]
    model.unlink()  # the record must stand on its own
    proc = subprocess.run([sys.executable, "-c", _FRESH, str(record), str(events)], capture_output=True,
                          text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    fresh_table, exported = proc.stdout.rsplit("EXPORTED", 1)
    assert "profile: " + table.strip() == fresh_table.strip()
    assert exported.split()[0] == "ExportedProgram" and int(exported.split()[1]) > 0

    data = load_record(record).data
    assert data["model"] == "small_cnn" and data["board"] == BOARD and data["quantize"] == "int8"
    handles = [o["handle"] for o in data["ops"]]
    assert handles == sorted(handles) and all(data["graph"][h]["name"] == o["name"]
                                               for h, o in zip(handles, data["ops"]))
    conv = next(o for o in data["graph"] if o["kind"] == "conv2d")
    assert conv["source"].startswith("small_cnn.py:") and conv["outputs"][0]["quant"]["scale"]
    assert {"input_offset", "output_offset", "act_min", "act_max"} <= set(conv["attrs"])
    assert any(t["constant"] for t in conv["inputs"])
    arena = data["memory"]["arenas"][0]
    assert sum(a["size"] for a in data["memory"]["arenas"]) == data["memory"]["arena_bytes"]
    assert all(b["offset"] + b["size"] <= arena["size"] for b in arena["buffers"])
    assert data["sizes"]["flash_bytes"] > 0 and data["sizes"]["breakdown"]["ram"]["arenas"] > 0


def test_a_bad_record_is_one_clear_error(tmp_path) -> None:
    with pytest.raises(McuError, match="does not exist"):
        load_record(tmp_path / "missing.mcurec")
    junk = tmp_path / "junk.mcurec"
    junk.write_bytes(b"not a zip")
    with pytest.raises(McuError, match="is not an mcu compile record"):
        load_record(junk)
    old = tmp_path / "old.mcurec"
    with zipfile.ZipFile(old, "w") as z:
        z.writestr("record.json", json.dumps({"version": 0}))
    with pytest.raises(McuError, match="has version 0"):
        load_record(old)
