"""Deterministic, generated stand-ins for the MLPerf Tiny input data (shared by the benchmarks).

No real data ships with the MLPerf Tiny models (Speech Commands, CIFAR-10 and ToyADMOS are not
reachable here). These generators synthesize signals and run them through the same kind of
feature pipeline the MLPerf Tiny training code uses, so that the values have the right scale,
structure and correlations -- but they are NOT real data: accuracy cannot be measured on them,
and class predictions on them are not meaningful. Parity (int8 vs float) on them is meaningful
only as agreement on plausible inputs.

Every generator takes (n, seed) and is a pure function of them (numpy Generator, no global state).
"""
from __future__ import annotations

import logging

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Optional, Tuple

import numpy as np
from scipy.signal import lfilter

SR = 16000


def find_mlperf_dir() -> Optional[Path]:
    """EDGEKIT_MLPERF_DIR, else the committed fixtures (tests/fixtures/mlperf_tiny); None if absent."""
    import os

    env = os.environ.get("EDGEKIT_MLPERF_DIR")
    path = Path(env) if env else Path(__file__).resolve().parents[1] / "fixtures" / "mlperf_tiny"
    return path if path.is_dir() else None


# ------------------------------------------------------------------------------------------------
# shared DSP helpers
# ------------------------------------------------------------------------------------------------
def _frames(x: np.ndarray, length: int, step: int) -> np.ndarray:
    count = 1 + (len(x) - length) // step
    idx = np.arange(length)[None, :] + step * np.arange(count)[:, None]
    return x[idx]


def _hann_periodic(n: int) -> np.ndarray:
    return 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)


def _htk_mel_matrix(num_mel: int, num_bins: int, sr: int, lo_hz: float, hi_hz: float) -> np.ndarray:
    """Same construction as tf.signal.linear_to_mel_weight_matrix (HTK mel, DC row zero)."""
    mel = lambda f: 1127.0 * np.log1p(np.asarray(f, np.float64) / 700.0)  # noqa: E731
    hz = np.linspace(0.0, sr / 2.0, num_bins)[1:]
    spec_mel = mel(hz)[:, None]
    edges = np.linspace(mel(lo_hz), mel(hi_hz), num_mel + 2)
    lower, center, upper = edges[:-2], edges[1:-1], edges[2:]
    w = np.maximum(0.0, np.minimum((spec_mel - lower) / (center - lower), (upper - spec_mel) / (upper - center)))
    return np.vstack([np.zeros((1, num_mel)), w])


def _slaney_mel_matrix(num_mel: int, n_fft: int, sr: int) -> np.ndarray:
    """librosa.filters.mel(sr, n_fft, n_mels) defaults (Slaney mel scale, 'slaney' area norm)."""

    def hz_to_mel(f):
        f = np.asarray(f, np.float64)
        lin = f / (200.0 / 3)
        log = 15.0 + np.log(np.maximum(f, 1e-10) / 1000.0) / (np.log(6.4) / 27.0)
        return np.where(f >= 1000.0, log, lin)

    def mel_to_hz(m):
        m = np.asarray(m, np.float64)
        lin = m * (200.0 / 3)
        log = 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0))
        return np.where(m >= 15.0, log, lin)

    fft_hz = np.linspace(0, sr / 2, 1 + n_fft // 2)
    mel_hz = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2), num_mel + 2))
    fdiff = np.diff(mel_hz)
    ramps = mel_hz[:, None] - fft_hz[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    w = np.maximum(0.0, np.minimum(lower, upper))
    w *= (2.0 / (mel_hz[2:] - mel_hz[:-2]))[:, None]
    return w.T  # (bins, mels)


def _resonator_envelope(freqs: np.ndarray, formants, widths) -> np.ndarray:
    env = np.full_like(freqs, 0.02)
    for f, bw in zip(formants, widths):
        env += 1.0 / (1.0 + ((freqs - f) / bw) ** 2)
    return env


# ------------------------------------------------------------------------------------------------
# KWS: 1 s synthetic "utterances" -> MLPerf Tiny KWS MFCC front end (49 x 10)
# ------------------------------------------------------------------------------------------------
KWS_WINDOW, KWS_STRIDE, KWS_FFT, KWS_MELS, KWS_DCT = 480, 320, 512, 40, 10  # 30 ms / 20 ms at 16 kHz
_KWS_MEL = _htk_mel_matrix(KWS_MELS, KWS_FFT // 2 + 1, SR, 20.0, 4000.0)


def _kws_utterance(rng: np.random.Generator) -> np.ndarray:
    t = np.arange(SR) / SR
    x = np.zeros(SR)
    kind = rng.random()
    if kind > 0.12:  # a voiced "word" with a fricative, 12 % are background-only clips
        start = rng.uniform(0.05, 0.45)
        dur = rng.uniform(0.25, 0.6)
        seg = (t >= start) & (t < start + dur)
        ts = t[seg] - start
        f0 = rng.uniform(90, 260) * (1 + rng.uniform(-0.25, 0.25) * ts / dur)
        phase = 2 * np.pi * np.cumsum(f0) / SR
        formants = rng.uniform([250, 800, 2000], [900, 2200, 3500])
        voiced = np.zeros(seg.sum())
        for k in range(1, 40):
            fk = k * f0.mean()
            if fk > 7000:
                break
            voiced += _resonator_envelope(np.array([fk]), formants, [120, 180, 250])[0] * np.sin(k * phase) / np.sqrt(k)
        attack = np.minimum(1.0, ts / 0.03) * np.minimum(1.0, (dur - ts) / 0.08)
        x[seg] += voiced * attack * (0.6 + 0.4 * np.sin(2 * np.pi * rng.uniform(2, 6) * ts))
        if rng.random() < 0.6:  # fricative: high-passed noise burst before or after the vowel
            fdur = rng.uniform(0.05, 0.15)
            fstart = start - fdur if rng.random() < 0.5 else start + dur
            fseg = (t >= fstart) & (t < fstart + fdur)
            noise = rng.normal(0, 1, fseg.sum())
            x[fseg] += rng.uniform(0.1, 0.5) * np.diff(noise, prepend=0.0)
    x += 10 ** rng.uniform(-3.5, -1.5) * rng.normal(0, 1, SR)  # background noise
    # Speech Commands clips shorter than 1 s are zero-padded, and the time-shift augmentation pads
    # with zeros too: a silent (all-zero) head or tail is common and gives the MFCC floor (-123.6).
    if rng.random() < 0.5:
        n_zero = int(rng.uniform(0.02, 0.3) * SR)
        if rng.random() < 0.5:
            x[:n_zero] = 0.0
        else:
            x[SR - n_zero:] = 0.0
    return x / np.max(np.abs(x))  # MLPerf KWS front end normalizes every clip by its maximum


def kws_mfcc(audio: np.ndarray) -> np.ndarray:
    """tf.signal.stft(480, 320, hann) -> |.| -> 40 HTK mels 20-4000 Hz -> log(+1e-6) ->
    tf.signal.mfccs_from_log_mel_spectrograms (DCT-II * rsqrt(2*40)) -> first 10."""
    frames = _frames(audio, KWS_WINDOW, KWS_STRIDE) * _hann_periodic(KWS_WINDOW)
    mag = np.abs(np.fft.rfft(frames, KWS_FFT))
    log_mel = np.log(mag @ _KWS_MEL + 1e-6)
    n = np.arange(KWS_MELS)
    dct = 2.0 * np.cos(np.pi * np.arange(KWS_DCT)[:, None] * (2 * n[None, :] + 1) / (2 * KWS_MELS))
    return (log_mel @ dct.T) / np.sqrt(2.0 * KWS_MELS)  # (49, 10)


def kws_inputs(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([kws_mfcc(_kws_utterance(rng)) for _ in range(n)])[..., None].astype(np.float32)


# ------------------------------------------------------------------------------------------------
# IC: 32x32 RGB "scenes" with raw pixel values 0..255 (the published int8 model has input
# scale 1.0, zero point -128, i.e. it was calibrated on unnormalized 0..255 pixels)
# ------------------------------------------------------------------------------------------------
def _ic_image(rng: np.random.Generator) -> np.ndarray:
    yy, xx = np.mgrid[0:32, 0:32] / 31.0
    c1, c2 = rng.uniform(0, 255, 3), rng.uniform(0, 255, 3)
    angle = rng.uniform(0, 2 * np.pi)
    g = np.clip(0.5 + (np.cos(angle) * (xx - 0.5) + np.sin(angle) * (yy - 0.5)), 0, 1)[..., None]
    img = c1 * (1 - g) + c2 * g
    for _ in range(rng.integers(1, 4)):  # one to three objects: soft-edged ellipses
        cy, cx = rng.uniform(0.2, 0.8, 2)
        ry, rx = rng.uniform(0.08, 0.35, 2)
        d = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2
        mask = np.clip((1.3 - d) / 0.6, 0, 1)[..., None]
        color = rng.uniform(0, 255, 3) * (1 + 0.3 * (yy[..., None] - cy))  # shading
        img = img * (1 - mask) + color * mask
    img += rng.normal(0, rng.uniform(2, 10), img.shape)  # sensor noise / texture
    return np.clip(np.round(img), 0, 255) + 0.0  # + 0.0: no negative zeros


def ic_inputs(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([_ic_image(rng) for _ in range(n)]).astype(np.float32)


# ------------------------------------------------------------------------------------------------
# AD: synthetic machine sounds -> DCASE/MLPerf AD features: 5 frames x 128 log-mel (10*log10 power)
# ------------------------------------------------------------------------------------------------
AD_FFT, AD_HOP, AD_MELS, AD_FRAMES = 1024, 512, 128, 5
_AD_MEL = _slaney_mel_matrix(AD_MELS, AD_FFT, SR)
_AD_EPS = np.finfo(float).eps


def _machine_sound(rng: np.random.Generator, samples: int) -> np.ndarray:
    t = np.arange(samples) / SR
    f_rot = rng.uniform(20, 120)  # motor rotation
    x = np.zeros(samples)
    for k in range(1, 60):
        if k * f_rot > 7500:
            break
        x += rng.uniform(0, 1) / k**0.7 * np.sin(2 * np.pi * k * f_rot * t + rng.uniform(0, 2 * np.pi))
    x *= 1 + 0.3 * np.sin(2 * np.pi * rng.uniform(1, 10) * t)  # load modulation
    alpha = rng.uniform(0.7, 0.99)  # coloured (low-pass) mechanical noise: AR(1) filter
    noise = lfilter([1.0], [1.0, -alpha], rng.normal(0, 1, samples))
    noise /= np.std(noise)
    x = x / np.std(x) + rng.uniform(0.3, 2.0) * noise
    return x * 10 ** rng.uniform(-3.3, -1.6)  # recording level (RMS 0.0005 .. 0.025 of full scale)


def ad_features(audio: np.ndarray) -> np.ndarray:
    frames = _frames(audio, AD_FFT, AD_HOP) * _hann_periodic(AD_FFT)
    power = np.abs(np.fft.rfft(frames, AD_FFT)) ** 2
    log_mel = 10.0 * np.log10(power @ _AD_MEL + _AD_EPS)  # 20/power*log10, power=2
    return log_mel[:AD_FRAMES].reshape(-1)  # 5 consecutive frames, frame-major: (640,)


def ad_inputs(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    samples = AD_FFT + AD_HOP * (AD_FRAMES - 1)
    return np.stack([ad_features(_machine_sound(rng, samples)) for _ in range(n)]).astype(np.float32)


@dataclass(frozen=True)
class Task:
    name: str
    generator: Callable[[int, int], np.ndarray]
    description: str


TASKS: Dict[str, Task] = {
    "kws": Task("kws", kws_inputs, "MFCC 49x10 of synthetic 1 s utterances (voiced harmonics + formants, fricative "
                "noise, background noise, zero-padded heads/tails), MLPerf KWS front end re-implemented in numpy"),
    "ic": Task("ic", ic_inputs, "32x32 RGB synthetic scenes (colour gradient + 1-3 shaded ellipses + noise), "
               "integer pixels 0..255, unnormalized as the published int8 input (scale 1.0, zp -128) implies"),
    "ad": Task("ad", ad_inputs, "5 frames x 128 log-mel (10*log10 power, librosa-style Slaney mel, n_fft 1024, hop 512) "
               "of synthetic machine sounds (motor harmonics, load modulation, coloured noise)"),
}


def float_range_of_int8_input(scale: float, zero_point: int) -> Tuple[float, float]:
    return (-128 - zero_point) * scale, (127 - zero_point) * scale


class CacheHits(logging.Handler):
    """Counts edgekit's 'activation statistics taken from cache' log records."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.hits = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "taken from cache" in record.getMessage():
            self.hits += 1
