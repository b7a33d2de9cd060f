"""`edgekit compile MODEL_INT8.tflite --target ethos-u55-128 -o OUTDIR`."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict

DEFAULT_TARGET = "ethos-u55-128"


def register(subparsers) -> Dict[str, Callable]:
    c = subparsers.add_parser("compile", help="int8 .tflite -> Arm Ethos-U NPU model (Vela) + Vela's performance estimate")
    c.add_argument("model", type=Path, help="full-int8 .tflite (e.g. model_int8.tflite from edgekit quantize)")
    c.add_argument("--target", default=DEFAULT_TARGET,
                   help="Vela accelerator config, e.g. ethos-u55-128 (default), ethos-u55-256, ethos-u65-256 "
                        "(an unknown name lists every one Vela accepts); gpu: which ops LiteRT's GPU delegate takes (.tflite); "
                        "ane: the Core ML program's ops (.mlpackage)")
    c.add_argument("--system-config", help="system config section of the Vela config (default: Vela's default for the "
                                           "accelerator, e.g. Ethos_U55_High_End_Embedded)")
    c.add_argument("--memory-mode", help="memory mode section of the Vela config (default: Vela's, e.g. Shared_Sram)")
    c.add_argument("--config", help="Vela .ini file (default: Arm/vela.ini shipped with Vela); needs --system-config "
                                    "and --memory-mode")
    c.add_argument("--optimise", default="Performance", choices=("Performance", "Size"), help="Vela's strategy")
    c.add_argument("--timeout", type=float, default=300.0, help="seconds Vela may take (default 300)")
    c.add_argument("-o", "--outdir", type=Path, help="output folder (default out/compile/<model>-<target>)")
    return {"compile": cmd_compile}


def cmd_compile(args) -> int:
    if args.target == "gpu":  # LiteRT GPU delegate placement (edgekit/mobile)
        from edgekit.mobile.delegate_cli import cmd_compile_gpu

        return cmd_compile_gpu(args)
    if args.target == "ane":  # Core ML program: per-op table (placement decided at runtime)
        from edgekit.mobile.delegate_cli import cmd_compile_ane

        return cmd_compile_ane(args)
    from edgekit.converters import CONVERTERS
    import edgekit.converters.vela  # noqa: F401  (registers "vela")

    outdir = args.outdir or Path("out") / "compile" / f"{args.model.stem}-{args.target}"
    converter = CONVERTERS.get("vela")()
    result = converter.convert(args.model, target=args.target, outdir=outdir, system_config=args.system_config,
                               memory_mode=args.memory_mode, config=args.config, optimise=args.optimise,
                               timeout_s=args.timeout)
    info = result.info
    p, m, pl = info["performance"], info["memory"], info["placement"]
    print(f"wrote {outdir}/model_vela.tflite, compile.json, report.md, per_layer_cycles.png, manifest.json")
    print(f"all figures {result.label}:")
    print(f"  NPU cycles {p['npu_cycles_total']:,}; inference {p['inference_time_ms']:.4g} ms; "
          f"MACs {p['macs_total']:,}; utilization {p['mac_utilization_percent']:.1f} %")
    print(f"  SRAM {m['sram_used_bytes']:,} bytes; off-chip flash {m['off_chip_flash_used_bytes']:,} bytes")
    if pl["all_on_npu"]:
        print("  every operator on the NPU")
    for op in pl["cpu_operators"]:
        print(f"  on the CPU: {op['op']} -> {op['ofm']}: {'; '.join(op['reasons'])}")
    return 0
