# syntax=docker/dockerfile:1
# gpu-capacity-predictor: the image of the loop and the training CronJobs (default target), and a slim
# image of the node agent and the XDP load Job (target `agent`) (k8s/).
#
#   docker build -t predictor:0.1.0 .                                   # CPU torch (default)
#   docker build --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu128 -t predictor:0.1.0-cu128 .
#   docker build --target agent -t predictor-agent:0.1.0 .              # node agent: no ML stack
#
# Stages: `bpf` compiles the XDP programs with clang; `build` makes a virtualenv with torch first (pinned
# to the chosen wheel index, so resolving the project never swaps in another torch build) and then the
# project; `runtime` holds only that virtualenv, the BPF objects, libbpf and a non-root user.
# `agent-build` makes a virtualenv with requirements-agent.txt and the project without its declared
# dependencies (`collect` and `xdp ...` never import torch, pandas, scikit-learn or mlflow); `agent` is
# `runtime` with that virtualenv. `runtime` stays the last stage, so a plain build is the full image.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM debian:bookworm-slim AS bpf
RUN apt-get update \
 && apt-get install -y --no-install-recommends clang llvm libbpf-dev gcc make libc6-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src/bpf
COPY bpf/Makefile bpf/*.c bpf/*.h ./
RUN make

FROM ${PYTHON_IMAGE} AS build
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# torch alone first, from the CPU (or CUDA) index; the project's `torch>=2.2,<2.15` then keeps it.
RUN pip install --index-url "${TORCH_INDEX_URL}" "torch==${TORCH_VERSION}"
WORKDIR /src
COPY pyproject.toml README.md ./
COPY predictor/ predictor/
COPY pipelines/ pipelines/
COPY models/ models/
RUN pip install . && pip check

FROM ${PYTHON_IMAGE} AS agent-build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
COPY requirements-agent.txt pyproject.toml README.md ./
COPY predictor/ predictor/
COPY pipelines/ pipelines/
COPY models/ models/
# No `pip check`: the ML dependencies are left out on purpose. Instead the agent's commands must start.
RUN pip install -r requirements-agent.txt \
 && pip install --no-deps . \
 && predictor collect --help > /dev/null \
 && predictor xdp agent --help > /dev/null \
 && predictor xdp load --help > /dev/null

FROM ${PYTHON_IMAGE} AS agent
# libbpf1: the XDP actuator calls libbpf.so.1 through ctypes; bpftool for operators' inspection.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libbpf1 bpftool \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 predictor \
 && useradd --system --uid 10001 --gid 10001 --home-dir /home/predictor --create-home --shell /usr/sbin/nologin predictor
COPY --from=agent-build /opt/venv /opt/venv
COPY --from=bpf /src/bpf/build/ /opt/predictor/bpf/
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PREDICTOR_XDP_OBJECT=/opt/predictor/bpf/xdp_lb.o
LABEL org.opencontainers.image.title="gpu-capacity-predictor-agent" \
      org.opencontainers.image.source="https://github.com/gpu-capacity-predictor/gpu-capacity-predictor" \
      org.opencontainers.image.licenses="Apache-2.0"
WORKDIR /home/predictor
# Numeric, so Kubernetes' runAsNonRoot can verify it; the xdp-agent container overrides it with runAsUser: 0.
USER 10001:10001
ENTRYPOINT ["predictor"]
CMD ["--help"]

FROM ${PYTHON_IMAGE} AS runtime
# libbpf1: the XDP actuator calls libbpf.so.1 through ctypes; bpftool for operators' inspection.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libbpf1 bpftool \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 predictor \
 && useradd --system --uid 10001 --gid 10001 --home-dir /home/predictor --create-home --shell /usr/sbin/nologin predictor
COPY --from=build /opt/venv /opt/venv
COPY --from=bpf /src/bpf/build/ /opt/predictor/bpf/
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PREDICTOR_XDP_OBJECT=/opt/predictor/bpf/xdp_lb.o \
    MPLCONFIGDIR=/tmp/matplotlib
LABEL org.opencontainers.image.title="gpu-capacity-predictor" \
      org.opencontainers.image.source="https://github.com/gpu-capacity-predictor/gpu-capacity-predictor" \
      org.opencontainers.image.licenses="Apache-2.0"
WORKDIR /home/predictor
# Numeric, so Kubernetes' runAsNonRoot can verify it; the node agent overrides it with runAsUser: 0.
USER 10001:10001
ENTRYPOINT ["predictor"]
CMD ["--help"]
