"""`edgekit ops`: the edgekit runtime's operator table, scanned from the kernel sources' `edgekit-op` tags."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Dict


def register(subparsers) -> Dict[str, Callable]:
    o = subparsers.add_parser("ops", help="the operators edgekit's int8 runtime implements (types, versions, fast paths)")
    fmt = o.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON instead of a text table")
    fmt.add_argument("--markdown", action="store_true", help="print a Markdown table")
    o.add_argument("--write", type=Path, metavar="FILE",
                   help="with --markdown: replace the table between FILE's <!-- edgekit-ops:begin/end --> markers "
                        "(e.g. firmware/runtime/README.md) instead of printing it")
    return {"ops": cmd_ops}


def cmd_ops(args) -> int:
    from edgekit.atomic import write_atomically
    from edgekit.errors import UserError
    from edgekit.firmware import optable
    from edgekit.firmware.support import KERNELS_DIR

    scan = optable.scan_kernels(KERNELS_DIR)
    problems = optable.tag_problems(scan)
    if problems:
        raise UserError("the kernel sources' edgekit-op tags do not match their ek_kernel definitions:\n"
                        + "\n".join(f"  - {p}" for p in problems),
                        fix="add one '/* edgekit-op: NAME | types: ... | versions: ... | fast path: ... */' line per "
                            "ek_kernel definition (see firmware/runtime/README.md)")
    entries = scan.entries
    if args.write is not None:
        if not args.markdown:
            raise UserError("--write replaces a Markdown block", fix="add --markdown")
        path = Path(args.write)
        if not path.is_file():
            raise UserError(f"{path} is not a file", fix="pass the README that holds the op table markers")
        text = optable.replace_block(path.read_text(), optable.to_markdown(entries), str(path))
        write_atomically(path, text)
        print(f"wrote the table of {len(entries)} operators into {path}")
        return 0
    if args.json:
        sys.stdout.write(optable.to_json(entries))
    elif args.markdown:
        sys.stdout.write(optable.to_markdown(entries))
    else:
        sys.stdout.write(optable.to_text(entries))
    return 0
