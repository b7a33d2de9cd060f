# edgekit: `make demo` (main job) and `make test` each install what they need first.
# Idempotent: a stamp file records the installed lock; re-running is quiet and fast.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q
STAMP := $(VENV)/.edgekit-installed
APT_PACKAGES := gcc g++ make cmake gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm clang libclang-rt-14-dev openssh-server openssh-client adb chromium
APT_STAMP := .venv/.apt-installed

.PHONY: install apt demo test test-fast bench docs clean

$(APT_STAMP): Makefile
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing apt packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi
	@mkdir -p $(VENV) && touch $@

$(STAMP): pyproject.toml requirements.lock | $(APT_STAMP)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing the Python environment into $(VENV) (first time: a few minutes)"
	@$(PIP) install torch==2.13.0 2>&1 | grep -v '^WARNING: Location' || true
	@$(PIP) install -r requirements.lock 2>&1 | grep -v '^WARNING: Location' || true
	@$(PIP) install --no-deps tf-keras==2.21.0 2>&1 | grep -v '^WARNING: Location' || true
	@$(PIP) install --no-deps -e . 2>&1 | grep -v '^WARNING: Location\|BuildBackendWarning\|^ *$$' | grep -i error || true
	@$(PY) -c "import edgekit.cli, ai_edge_litert, tensorflow, torch, litert_torch, onnx2tf" 2>/dev/null || { echo "the environment did not install; rerun with: $(PIP) install -r requirements.lock"; exit 1; }
	@touch $@

install: $(STAMP)

demo: install
	$(VENV)/bin/edgekit deploy edgekit/demo/digits_cnn.pt2 \
	  --calib calibration_data/digits/calib --eval-data calibration_data/digits/eval \
	  --board mps2-an386 -o out/demo

test: install
	$(PY) -m pytest -q -ra --durations=15 -n 2 --dist loadgroup tests

test-fast: install  # everything except the end-to-end tests marked slow
	$(PY) -m pytest -q -ra -n 2 --dist loadgroup -m "not slow" tests

bench: install
	$(PY) tests/benchmarks/run_all.py --out out/bench

docs: install  # the documentation site (docs/, mkdocs.yml) into out/site; strict: a broken link or include fails
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict -d out/site

clean:
	rm -rf out build *.egg-info
