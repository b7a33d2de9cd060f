"""Per-phase energy of `edgekit run --pipeline` from Android battery current: the runner samples the battery
on the device (the clock of the phase windows) and the host attributes the samples to the phase windows, as
for RAPL and host power monitors. Fixtures in tests/fixtures/android_battery (see its README); the phone run
itself needs a phone and skips."""
import json
import os
from pathlib import Path

import pytest

from edgekit.run.pipeline.budget import budget, budget_table, device_power_energy
from edgekit.run.runners.pipeline_runner import BatterySampler
from tests.preprocessing.edge_cases import PHOTOS
from tests.run.runtools import IC_INT8
from tests.run.test_run_pipeline import write_pipeline

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "android_battery"
PROFILE = {"name": "test-phone", "power_model": {"idle_w": 1.0, "full_load_w": 5.0, "cores": 8,
                                                 "source": "test figures, not a real phone"}}


def test_battery_samples_are_attributed_to_the_phase_windows():
    raw = json.loads((FIXTURES / "pipeline_power_run.json").read_text())
    rows = {r.phase: r for r in budget(raw, PROFILE, 1).phases}
    # every decode/preprocess/inference window holds at least one 10 ms sample: exactly its phase's power x time
    assert rows["decode"].energy.value_uj == pytest.approx(2.0 * 20e-3 * 1e6)
    assert rows["preprocess"].energy.value_uj == pytest.approx(1.5 * 10e-3 * 1e6)
    assert rows["inference"].energy.value_uj == pytest.approx(3.5 * 40e-3 * 1e6)
    # a 2 ms post-process window mostly falls between samples: it takes the nearest one, and the note says how often
    post = rows["postprocess"].energy
    assert 1.0 * 2e-3 * 1e6 <= post.value_uj <= 3.5 * 2e-3 * 1e6
    assert "inside this phase's 40 windows" in post.note
    for r in rows.values():
        assert r.energy.method == "measured"
        assert r.energy.source.startswith("Android battery CURRENT_NOW x VOLTAGE_NOW")
        assert r.energy.source.endswith("samples attributed to the phase time windows")
    table = "\n".join(budget_table(budget(raw, PROFILE, 1)))
    assert "140 mJ (measured)" in table and "Bottleneck: **inference**" in table


def test_charging_battery_is_flagged_and_no_samples_fall_back_to_a_labelled_estimate():
    raw = json.loads((FIXTURES / "pipeline_power_run.json").read_text())
    raw["power"]["battery_status"] = "Charging"
    assert "CHARGING" in device_power_energy(raw, "inference").note
    raw["power"], raw["power_unavailable"] = None, "/sys/class/power_supply/battery/uevent is not readable here"
    rows = budget(raw, PROFILE, 1).phases
    assert {r.energy.method for r in rows} == {"estimated"}
    assert all("not measured: /sys/class/power_supply/battery/uevent is not readable" in r.energy.source
               for r in rows)
    assert {r.energy.method for r in budget(raw, {}, 1).phases} == {"unavailable"}


@pytest.mark.parametrize("name, watts, status", [("uevent_discharging.txt", 0.412 * 3.85, "Discharging"),
                                                 ("uevent_charging.txt", 1.25 * 4.12, "Charging"),
                                                 ("uevent_no_current.txt", None, "Discharging")])
def test_device_sampler_reads_the_uevent_like_the_adb_monitor(name, watts, status):
    from edgekit.run.runners.adb import battery_power_w, parse_power_supply_uevent

    sampler = BatterySampler(str(FIXTURES / name), 0.01)
    value = sampler.read_w()
    assert value == (pytest.approx(watts) if watts else None) and sampler.status == status
    assert value == battery_power_w(parse_power_supply_uevent((FIXTURES / name).read_text()))


def test_the_runner_samples_a_power_supply_file_during_the_run(tmp_path):
    """The whole device-side path on this host, with the battery's uevent file given as a file."""
    from edgekit.run.base import DeviceTarget
    from edgekit.run.pipeline.budget import list_frames, load_pipeline, model_facts, run_on_device

    pipeline = load_pipeline(write_pipeline(tmp_path), "host")
    pipeline = pipeline.with_model(model_facts(IC_INT8, pipeline.preprocess.spec_object()))
    frames = list_frames(PHOTOS, pipeline.decode)
    raw = run_on_device(DeviceTarget("host", "", {}), IC_INT8, pipeline, frames, iterations=8, warmup=1, threads=1,
                        timeout_s=120, options={},
                        power_sampler={"uevent": str(FIXTURES / "uevent_discharging.txt"), "interval_s": 0.002})
    assert raw["power"]["samples"] and raw["power"]["battery_status"] == "Discharging"
    rows = budget(raw, PROFILE, 1).phases
    for r in rows:  # a constant 1.5862 W: each phase's energy is that power times its mean duration
        mean_ms = sum(raw["phases_ms"][r.phase]) / 8
        assert r.energy.method == "measured"
        assert r.energy.value_uj == pytest.approx(0.412 * 3.85 * mean_ms * 1e3)
    missing = run_on_device(DeviceTarget("host", "", {}), IC_INT8, pipeline, frames[:1], iterations=2, warmup=0,
                            threads=1, timeout_s=120, options={},
                            power_sampler={"uevent": str(tmp_path / "no-such-uevent"), "interval_s": 0.01})
    assert missing["power"] is None and "is not readable here" in missing["power_unavailable"]


@pytest.mark.skipif(not os.environ.get("EDGEKIT_TEST_ADB_SERIAL"),
                    reason="needs an Android phone on adb (battery, python with numpy and a TFLite runtime): "
                           "set EDGEKIT_TEST_ADB_SERIAL")
def test_phone_pipeline_energy_is_measured_from_the_battery(cli, tmp_path):
    out = tmp_path / "out"
    assert cli("run", IC_INT8, "--device", f"adb:{os.environ['EDGEKIT_TEST_ADB_SERIAL']}", "--pipeline",
               write_pipeline(tmp_path), "--inputs", PHOTOS, "-n", "50", "-o", out) == 0
    rows = json.loads((out / "pipeline.json").read_text())["budget"]["phases"]
    assert {r["energy"]["method"] for r in rows} == {"measured"}
    assert all("Android battery" in r["energy"]["source"] for r in rows)


def test_clock_offset_takes_the_fastest_line_of_each_burst():
    from edgekit.run.pipeline.clock import clock_offset

    # device clock = host clock - 100 s; lines arrive 0.4..3 ms after they were printed; 0.2 ms drift over the run
    start = [(1000.0 + i * 0.005 + d, 900.0 + i * 0.005) for i, d in enumerate((0.003, 0.0004, 0.001, 0.002))]
    end = [(1010.0 + i * 0.005 + d + 0.0002, 910.0 + i * 0.005) for i, d in enumerate((0.0005, 0.0009, 0.0004, 0.003))]
    c = clock_offset(start + end)
    assert c["offset_s"] == pytest.approx(100.0 + 0.0004 + 0.0001) and c["drift_s"] == pytest.approx(0.0002)
    assert c["lines"] == 8 and clock_offset([]) is None


def test_ssh_pipeline_with_a_host_read_power_monitor(cli, tmp_path, sshd):
    """A monitor read by the host (an INA219 through the hwmon driver's files; a constant 2.5 W here) on a
    remote device: the runner's clock lines put its phase windows on the host clock, then the samples are
    attributed to them."""
    hwmon = tmp_path / "hwmon"
    hwmon.mkdir()
    (hwmon / "power1_input").write_text("2500000\n")  # microwatts
    out = tmp_path / "out"
    code = cli("run", IC_INT8, "--device", sshd.device, *sshd.cli_args(), "--pipeline", write_pipeline(tmp_path),
               "--inputs", PHOTOS, "-n", "6", "--warmup", "1", "--power-monitor", f"ina219:hwmon={hwmon}", "-o", out)
    assert code == 0
    report = json.loads((out / "pipeline.json").read_text())
    for r in report["budget"]["phases"]:
        e = r["energy"]
        assert e["method"] == "measured" and "samples attributed to the phase time windows" in e["source"]
        assert "placed on this host's clock" in e["note"]
        assert e["value_uj"] == pytest.approx(2.5 * r["latency_ms"]["mean"] * 1e3)


def test_rapl_monitor_for_a_pipeline_on_a_host_without_rapl_is_one_clear_message(cli, tmp_path, capsys):
    # RAPL is read by the runner itself at the phase boundaries; on this machine it is not readable at all
    code = cli("run", IC_INT8, "--device", "host", "--pipeline", write_pipeline(tmp_path), "--inputs", PHOTOS,
               "--power-monitor", "rapl", "-o", tmp_path / "out")
    err = capsys.readouterr().err
    if code == 0:
        pytest.skip("RAPL is readable on this host")
    assert "power monitor rapl" in err and not (tmp_path / "out").exists()
