"""Regenerate tests/fixtures/android_battery/pipeline_power_run.json (see the README there):
``python -m tests.run.android_power_fixture``."""
import json
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "android_battery" / "pipeline_power_run.json"
PHASES = (("decode", 20.0, 2.0), ("preprocess", 10.0, 1.5), ("inference", 40.0, 3.5), ("postprocess", 2.0, 1.2))
GAP_MS, GAP_W, RUNS, INTERVAL_S, T0 = 1.0, 1.0, 40, 0.010, 5000.0


def build() -> dict:
    phases_ms = {p: [] for p, _, _ in PHASES}
    starts = {p: [] for p, _, _ in PHASES}
    spans = []  # (start, end, W)
    t = T0
    for _ in range(RUNS):
        for phase, ms, watts in PHASES:
            phases_ms[phase].append(ms)
            starts[phase].append(round(t, 9))
            spans.append((t, t + ms / 1e3, watts))
            t += ms / 1e3
        spans.append((t, t + GAP_MS / 1e3, GAP_W))
        t += GAP_MS / 1e3
    samples, s = [], T0 + 0.0043  # the sampler's phase against the loop is arbitrary
    while s < t:
        watts = next((w for a, b, w in spans if a <= s < b), GAP_W)
        samples.append([round(s, 9), watts])
        s += INTERVAL_S
    return {"phases_ms": phases_ms, "phase_start_monotonic_s": starts,
            "power": {"samples": samples, "reads": len(samples), "interval_s": INTERVAL_S,
                      "battery_status": "Discharging",
                      "source": "Android battery CURRENT_NOW x VOLTAGE_NOW (/sys/class/power_supply/battery/uevent) "
                                "sampled on the device every 10 ms"},
            "power_unavailable": None, "energy_uj": None}


if __name__ == "__main__":
    FIXTURE.write_text(json.dumps(build(), indent=1) + "\n")
    print(f"wrote {FIXTURE}")
