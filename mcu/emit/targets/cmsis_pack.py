"""cmsis-pack: a CMSIS software pack (``<vendor>.<name>.pdsc`` and the ``.pack`` archive) with one
component holding the model library, for CMSIS-Toolbox csolution projects and pack managers."""

from __future__ import annotations

import datetime
import zipfile
from pathlib import Path

from mcu.emit.targets.common import ExportJob, Writer, write_library_tree

VENDOR = "mcu"


def pack_name(prefix: str) -> str:
    """Pack names allow letters, digits, '-' and '_' only; the prefix is a C identifier, so it qualifies."""
    return prefix


def write(job: ExportJob) -> list[Path]:
    p = job.lib.prefix
    w = Writer(job.out_dir)
    tree = write_library_tree(w, job, embed_defines=True)
    name = pack_name(p)
    view = {"m": job.lib.view, "vendor": VENDOR, "name": name, "tree": tree,
            "date": datetime.date.today().isoformat(),
            "public_header": f"{p}_model.h"}
    pdsc = w.render(f"{VENDOR}.{name}.pdsc", "targets/cmsis-pack/package.pdsc.j2", **view)
    # The archive holds the .pdsc at its root beside the files it lists, as pack managers expect.
    archive = job.out_dir / f"{VENDOR}.{name}.{job.lib.view.version}.pack"
    members = [pdsc] + [job.out_dir / rel for rel in tree.sources + tree.headers]
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for path in members:
            z.write(path, path.relative_to(job.out_dir).as_posix())
    w.written.append(archive)
    return w.written
