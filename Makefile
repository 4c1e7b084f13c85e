# Two commands for a newcomer: `make test` (the README's test command, also what CI runs) and
# `make run` (arrives with the controller). Everything else is a helper of those.

PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
# Reinstall only when the dependency declaration changes (second runs are fast).
DEPS_HASH := $(shell cat pyproject.toml constraints.txt 2>/dev/null | sha256sum | cut -c1-16)
STAMP := $(VENV)/.deps-$(DEPS_HASH)
export PATH := $(BIN):$(PATH)

.PHONY: test test-real faults fuzz run bench soak e2e differential lint typecheck imports unit venv builder crd image clean

test: venv builder
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest -n 3 --dist loadfile

# Fault injection with every crash point, dropped event and lag (make test samples them): docs/testing.md.
faults: venv builder
	FAULTS_EXHAUSTIVE=1 $(BIN)/pytest tests/integration/faults -n 3 --dist loadfile $(ARGS)

# Coverage-guided fuzzing of every tenant-reachable parser with atheris (never part of make test, which
# runs each target's short seeded run): FUZZ_SECONDS per target, ARGS=<target ...> to pick some, a 1 s
# per-input hang limit and an RSS bound. Findings go to .fuzz/crashes/<target>/ (git-ignored): docs/testing.md.
FUZZ_SECONDS ?= 60
FUZZ_RSS_MB ?= 1024
fuzz: venv
	@$(BIN)/python -c "import atheris" 2>/dev/null || $(BIN)/python -m pip install --quiet -c constraints.txt atheris
	nice -n 10 $(BIN)/python -m tests.fuzz --seconds $(FUZZ_SECONDS) --timeout 1 --rss-limit-mb $(FUZZ_RSS_MB) $(ARGS)

# The controller's main job. With a reachable cluster in KUBECONFIG it runs the controller against it
# (ARGS are controller flags); otherwise it starts the embedded API server, publishes examples/ as a
# source and shows the controller converging (ARGS=--once exits once the Kustomization is Ready).
run: venv builder
	@if [ -n "$$KUBECONFIG" ] && $(BIN)/kubectl get --raw /version --request-timeout=5s >/dev/null 2>&1; then \
		echo "running the controller against the cluster in KUBECONFIG"; \
		$(BIN)/kustomize-controller run $(ARGS); \
	else \
		echo "no reachable cluster in KUBECONFIG: running the demo on the embedded API server"; \
		$(BIN)/kustomize-controller demo $(ARGS); \
	fi

# Benchmarks (never part of make test): writes docs/benchmarks.md. ARGS=--quick for a smoke run.
bench: venv builder
	$(BIN)/python -m bench $(ARGS)

# The chaos soak on a real control plane from KUBE_ASSETS (issue 38; 30 minutes of faults on 300 Kustomizations,
# about 45 minutes in all; never part of make test): raw results in bench/results/soak.json, figures in
# docs/testing.md. ARGS e.g. --soak-duration 600, --soak-seed 39, --quick (30 Kustomizations, 2 minutes),
# --keep-workdir (logs, audit log). Without KUBE_ASSETS it fails saying what is missing.
SOAK_JSON ?= bench/results/soak.json
soak: venv builder
	$(BIN)/python -m bench --scenarios soak --out - --json $(SOAK_JSON) $(ARGS)

# The integration suite on a real control plane started from KUBE_ASSETS (kube-apiserver, etcd and optionally
# kube-controller-manager: tests/controlplane, docs/testing.md); without them it says what is missing and skips.
test-real: venv builder
	$(BIN)/python -m tests.controlplane run --export TEST_KUBECONFIG -- $(BIN)/pytest -m integration tests $(ARGS)

# End-to-end scenarios against a real cluster: E2E_KUBECONFIG, else a control plane from KUBE_ASSETS; skipped
# cleanly without either.
e2e: venv builder
	@if [ -n "$$E2E_KUBECONFIG" ]; then \
		$(BIN)/pytest e2e $(ARGS); \
	else \
		$(BIN)/python -m tests.controlplane run --export E2E_KUBECONFIG -- $(BIN)/pytest e2e $(ARGS); \
	fi

# The differential conformance run (conformance/README.md, docs/conformance.md): every case of the corpus
# under upstream's kustomize-controller (FLUX_ASSETS) and under ours on one control plane (KUBE_ASSETS, or
# CONFORMANCE_KUBECONFIG), compared; then the swap both ways. Skipped with one line without them.
# ARGS e.g. --cases prune,wait --no-swap --json out.json --write-docs docs/conformance.md
differential: venv builder
	$(BIN)/python -m conformance $(ARGS)

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	rm -f $(VENV)/.deps-*
	touch $@

# A kustomize builder pinned by version (kustomize_controller/kustomize/pin.py: kubectl v1.36.3 = kustomize v5.8.1,
# as upstream Flux pins), installed next to the venv's python, where the controller looks for it first.
builder: $(BIN)/kubectl

$(BIN)/kubectl: scripts/install_kubectl.py kustomize_controller/kustomize/pin.py | $(STAMP)
	$(BIN)/python scripts/install_kubectl.py $(BIN)

# The controller's image, tagged as manifests/deployment/kustomization.yaml deploys it (never part of make test;
# tests/image checks its install steps without Docker). DOCKER_BUILD_ARGS e.g. `--network host` or
# `--build-arg PYTHON_IMAGE=...`; IMAGE overrides the reference (e.g. a registry's).
IMAGE ?= $(shell $(PYTHON) scripts/image_ref.py)
image:
	docker build $(DOCKER_BUILD_ARGS) -t $(IMAGE) .
	@echo "built $(IMAGE)"

lint: venv
	$(BIN)/ruff check .

typecheck: venv
	$(BIN)/mypy

imports: venv
	$(BIN)/lint-imports

unit: venv builder
	$(BIN)/pytest tests/unit

# The CRD is generated from the API models; a test checks the checked-in copy is current.
crd: venv
	$(BIN)/python -m kustomize_controller.api.crdgen > manifests/crd/bases/kustomize.toolkit.fluxcd.io_kustomizations.yaml

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
